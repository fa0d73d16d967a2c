"""What Spack knows of the node it runs on, for `bin/iostack site init`, as JSON on stdout.

    spack -e <scratch env> node-facts

run in the scratch environment site init made and ran `spack compiler find` and `spack
external find` in (lib/iostack/offline/siteinit.py). Prints the node's platform, OS, target
and libc as Spack names them, and for each external the
detection wrote, its spec and prefix, the files Spack's own finders matched for it there
and where their links end (site init asks dpkg which package owns them), and the virtual
packages it provides.
"""
import json
import os
import sys

import spack.config
import spack.detection.path
import spack.platforms
import spack.repo
import spack.util.libc

description = "print the node's platform, OS, target, libc and detected externals (iostack)"
section = "config"
level = "long"

#: prefixes that hold many packages: the prefix itself names none of them
SHARED_PREFIXES = ("/", "/usr", "/usr/local")


def candidate_files(pkg_cls) -> list[str]:
    """Files Spack's finders match for a package where they search by default."""
    files = []
    for finder in (spack.detection.path.ExecutablesFinder(), spack.detection.path.LibrariesFinder()):
        patterns = finder.search_patterns(pkg=pkg_cls)
        if patterns:
            files += [(finder, f) for f in finder.candidate_files(
                patterns=patterns, paths=finder.default_path_hints())]
    return files


def files_of(entry: dict, candidates) -> list[str]:
    """The files that identify one external: its compilers, else the finders' matches in its
    prefix, else (a prefix of its own) the prefix."""
    compilers = (entry.get("extra_attributes") or {}).get("compilers") or {}
    if compilers:
        return [compilers[lang] for lang in ("c", "cxx", "fortran") if lang in compilers]
    prefix = os.path.normpath(entry["prefix"])
    found = sorted(f for finder, f in candidates
                   if os.path.normpath(finder.prefix_from_path(path=os.path.dirname(f))) == prefix)
    return found or ([prefix] if prefix not in SHARED_PREFIXES else [])


def setup_parser(subparser):
    pass


def node_facts(parser, args):
    host = spack.platforms.host()
    libc = spack.util.libc.libc_from_current_python_process()
    externals, provides = {}, {}
    for name, config in sorted(spack.config.get("packages").items()):
        entries = (config or {}).get("externals") or []
        if not entries:
            continue
        pkg_cls = spack.repo.PATH.get_pkg_class(name)
        candidates = candidate_files(pkg_cls)
        externals[name] = []
        for entry in entries:
            files = files_of(entry, candidates)
            # where links end, here: the records are read on other machines
            links = {f: os.path.realpath(f) for f in files if os.path.realpath(f) != f}
            externals[name].append({**entry, "files": files, "links": links})
        provides[name] = sorted({v.name for specs in pkg_cls.provided.values() for v in specs})
    json.dump({
        "platform": str(host),
        "os": str(host.default_operating_system()),
        "target": str(host.default_target()),
        "libc": f"{libc.name}@{libc.version}" if libc else None,
        "externals": externals,
        "provides": provides,
    }, sys.stdout, indent=1, sort_keys=True)
    print()
