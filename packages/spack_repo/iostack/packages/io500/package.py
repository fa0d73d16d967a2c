# iostack: the IO500 benchmark ([IO500-OFP]), built against the stack's IOR.
import os

from spack_repo.builtin.build_systems.makefile import MakefilePackage
from spack_repo.iostack.git_sources import GitSourcesPackage

from spack.package import *


class Io500(GitSourcesPackage, MakefilePackage):
    """IO500: IOR easy/hard and mdtest easy/hard phases plus find, scored as
    sqrt(geomean(bandwidths) x geomean(metadata rates)).

    io500's own prepare.sh clones IOR and pfind during the build; this recipe builds the
    io500 sources only and links IOR's AIORI library from the iostack `ior` package, so
    nothing is downloaded while building."""

    homepage = "https://io500.org"
    git = "https://github.com/IO500/io500.git"

    license("MIT")

    # IO500 publishes no release tarballs. This is a full commit of github.com/IO500/io500
    # (the one whose prepare.sh pins IOR 06fc08e147600f4e5896a5b9b2bf8f1c4a79121f).
    version("2023.bb08c87", commit="bb08c873af21fad889838c5a4470868cb1294653")

    # pfind, io500's parallel find. io500's prepare.sh names the short hash 778dca8: in
    # github.com/VI4IO/pfind it is this commit ("Merge pull request #20", 2023-04-17).
    resource(name="pfind", git="https://github.com/VI4IO/pfind.git",
             commit="778dca873381ce0a35fe39f8972c906a3c2f4584", destination="build",
             placement="pfind")

    # Each commit's tree by content (source_digest.py): `git archive --format=tar --prefix=src/
    # COMMIT | python3 source_digest.py -` on the two repositories; a mirror's tarball of
    # either commit must have it (git_sources.py).
    GIT_SOURCE_SHA256 = {
        "bb08c873af21fad889838c5a4470868cb1294653":
            "912d813f1838d7d1c3f29f798c227f714604a911930eb41d4aa5de1b9850727b",
        "778dca873381ce0a35fe39f8972c906a3c2f4584":
            "ced0b3b79f2dbf93361295e11dfd55c4c9aa1f9a7111c18ca8e10fff398945df",
    }

    depends_on("c", type="build")
    depends_on("mpi")
    depends_on("ior@4:")

    def edit(self, spec, prefix):
        ior = spec["ior"].prefix
        # Point the Makefile at the installed IOR instead of ./build/ior.
        filter_file(r"\./build/ior/src/build\.conf", join_path(ior.include.ior, "build.conf"),
                    "Makefile")
        filter_file(r"-I\./build/ior/src/", f"-I{ior.include.ior}", "Makefile")
        filter_file(r"\./build/ior/src/libaiori\.a", join_path(ior.lib, "libaiori.a"), "Makefile")
        filter_file(r"^VERSION_GIT=.*", f"VERSION_GIT={self.version}", "Makefile")

    @run_before("build")
    def build_pfind(self):
        # pfind's prepare.sh only clones lz4 from GitHub (an optional speed-up of pfind's
        # work stealing); without it pfind builds alone and nothing is downloaded
        with working_dir(join_path("build", "pfind")):
            Executable("./compile.sh")(extra_env={"CC": self.spec["mpi"].mpicc})

    @property
    def build_targets(self):
        return [f"CC={self.spec['mpi'].mpicc}"]

    def install(self, spec, prefix):
        mkdirp(prefix.bin, prefix.share.io500)
        install("io500", prefix.bin)
        if os.path.exists("io500-verify"):
            install("io500-verify", prefix.bin)
        for ini in find(".", "config-*.ini", recursive=False):
            install(ini, prefix.share.io500)
