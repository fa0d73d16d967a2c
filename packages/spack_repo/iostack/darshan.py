"""Darshan's runtime and utilities as the stack builds them: from the `darshan-3.4.7` tag by
commit, the one source of both packages.

Darshan's published tarballs are `make dist` archives with a generated `configure`, so no
archive made from the tag matches builtin's sha256 pins (the offline mirror holds the tag's
tree, `../shared/spack/README.md`). The tag's tree has no `configure`: upstream's
`prepare.sh` (`autoreconf -fi` at the top, which recurses into darshan-runtime and
darshan-util) makes it. The `autoperf` submodule is left out: it serves only the +apmpi and
+apxc variants, off by default."""
from spack.package import Executable, conflicts, version

from spack_repo.iostack.git_sources import GitSourcesPackage

COMMIT = "ba0b5b1b72151cb4398909ba218dcd774bffe1c1"


class DarshanFromTag(GitSourcesPackage):
    """Mixin: version 3.4.7 from the tag's commit, configured as upstream's prepare.sh does."""

    # github.com/darshan-hpc/darshan, tag darshan-3.4.7 (the commit it points at)
    version("3.4.7", commit=COMMIT, submodules=False)

    # `git archive --format=tar --prefix=src/ darshan-3.4.7 | python3 source_digest.py -` on
    # upstream's repository; the offline mirror's tarball of the commit has the same
    GIT_SOURCE_SHA256 = {
        COMMIT: "678e2d7362e132fdb364bdab784065c27caa15164699490de7c8f5d680708ba7",
    }

    conflicts("+apmpi", msg="the autoperf submodule is not part of the pinned source")
    conflicts("+apxc", msg="the autoperf submodule is not part of the pinned source")

    def autoreconf(self, spec, prefix):
        # the tag's tree: configure comes from upstream's own script, at the top
        Executable("./prepare.sh")()
