"""Run a spack command for a cluster site on a machine that is not one of its nodes.

    spack -e <site env> offsite <command> [args...]      # e.g. concretize --fresh --force

Spack 1.1 learns which libc a compiler targets by running it (`cc -v`, then the dynamic linker
that names). A cluster's compilers (CCE under /opt/cray, the HPC image's gcc) do not run on the
machine that writes the site's lock, or run as the host's compiler, so Spack either drops them
(no compiler-wrapper, gcc-runtime or libc in the lock: a build from it has no CC/CXX/FC) or
records the host's libc. A cluster site therefore declares its libc as a non-buildable
external in its packages.yaml (the one `sites/<site>.yaml` names); here every compiler of the
site is taken to run and to target that libc, which is what Spack detects on the nodes.
A site that declares no libc (`local`, concretized on its own node) runs unchanged.

It replaces two methods of Spack's CompilerPropertyDetector for the command it runs, so it
refuses a Spack it was not written for (SUPPORTED): check that class in
lib/spack/spack/compilers/libraries.py of the new Spack, then add its version here.
"""
import argparse
import re

import spack
import spack.compilers.libraries
import spack.config
import spack.main
import spack.spec
from spack.llnl.util import tty

description = "run a spack command for a cluster site, off its nodes (iostack)"
section = "environments"
level = "long"

#: Spack versions (major, minor) whose CompilerPropertyDetector this was written against
SUPPORTED = ((1, 1),)
REPLACED = ("compiler_verbose_output", "default_libc")
LIBC_PACKAGES = ("glibc", "musl")


def setup_parser(subparser):
    subparser.add_argument("spack_command", nargs=argparse.REMAINDER,
                           help="the spack command and its arguments")


def check_spack_version(version=None, detector=None):
    """None if this Spack is one the extension was written for, else why not."""
    version = tuple(version or spack.spack_version_info)[:2]
    detector = detector or spack.compilers.libraries.CompilerPropertyDetector
    missing = [name for name in REPLACED if not hasattr(detector, name)]
    if version not in SUPPORTED or missing:
        return (f"spack offsite was written for Spack "
                f"{', '.join('.'.join(map(str, v)) for v in SUPPORTED)}, whose "
                f"CompilerPropertyDetector it changes ({', '.join(REPLACED)}); this Spack is "
                f"{'.'.join(map(str, version))}"
                + (f" and has no {', '.join(missing)}" if missing else "")
                + ": check spack-ext/spack-iostack/iostack/cmd/offsite.py against it")
    return None


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


def offsite(parser, args):
    problem = check_spack_version()
    if problem:
        tty.die(problem)
    if not args.spack_command:
        tty.die("usage: spack -e <env> offsite <spack command> [args...]")
    libc = declared_libc()
    if libc:
        tty.msg(f"the site's compilers are taken to target its declared libc {libc[0]}")
        target_declared_libc(*libc)
    command = spack.main.SpackCommand(args.spack_command[0])
    command(*args.spack_command[1:], fail_on_error=False)
    if command.error is not None:
        tty.error(str(command.error))
        return 1
    return command.returncode or 0
