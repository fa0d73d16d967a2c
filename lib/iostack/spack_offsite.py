"""Run a spack command for a cluster site on a machine that is not one of its nodes.

Runs inside Spack: `spack -e <site env> python spack_offsite.py <command> [args...]`.

Spack 1.1 learns which libc a compiler targets by running it (`cc -v`, then the dynamic linker
that names). A cluster's compilers (CCE under /opt/cray, the HPC image's gcc) do not run on the
machine that writes the site's lock, or run as the host's compiler, so Spack either drops them
(no compiler-wrapper, gcc-runtime or libc in the lock: a build from it has no CC/CXX/FC) or
records the host's libc. A cluster site therefore declares its libc as a non-buildable
external in its packages.yaml (the one `sites/<site>.yaml` names); here every compiler of the
site is taken to run and to target that libc, which is what Spack detects on the nodes.
A site that declares no libc (`local`, concretized on its own node) runs unchanged.
"""
import re
import sys

import spack.compilers.libraries
import spack.config
import spack.main
import spack.spec
from spack.llnl.util import tty

LIBC_PACKAGES = ("glibc", "musl")


def declared_libc():
    """The site's libc external as Spack's detection would report it, or None."""
    packages = spack.config.get("packages")
    found = []
    for name in LIBC_PACKAGES:
        for external in packages.get(name, {}).get("externals", []):
            # the version as detection reports it: exact (@=)
            found.append((re.sub(r"@(?!=)", "@=", external["spec"], count=1), external["prefix"]))
    if len(found) > 1:
        tty.die(f"the site declares {len(found)} libc externals; a node has one: {found}")
    return found[0] if found else None


def target_declared_libc(spec_string, prefix):
    def default_libc(_detector):
        libc = spack.spec.Spec(spec_string)
        libc.external_path = prefix
        return libc

    detector = spack.compilers.libraries.CompilerPropertyDetector
    # "the compiler runs" (not None) without running it; nothing else reads the output
    # during concretization
    detector.compiler_verbose_output = lambda _detector: ""
    detector.default_libc = default_libc


def main(argv):
    if not argv:
        tty.die("usage: spack -e <env> python spack_offsite.py <spack command> [args...]")
    libc = declared_libc()
    if libc:
        tty.msg(f"the site's compilers are taken to target its declared libc {libc[0]}")
        target_declared_libc(*libc)
    command = spack.main.SpackCommand(argv[0])
    command(*argv[1:], fail_on_error=False)
    if command.error is not None:
        tty.error(str(command.error))
        return 1
    return command.returncode or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
