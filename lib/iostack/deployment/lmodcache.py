"""Lmod spider cache of a release.

Lmod keys its cache by the MODULEPATH directory as users spell it, and users spell
`<root>/current/modulefiles/Core`. A release is built before `current` points at it, so its
cache is generated from the release's own path (Lmod's update_lmod_system_cache_files) and
that Core path is then rewritten to the `current` one: the result is byte for byte what a
walk through `current` gives (tests/integration/test_releases_lmod.py compares them). The
lower levels of the hierarchy keep the release's own paths, as Spack's modules put those on
MODULEPATH, so a job that loaded an MPI stays in its release after a switch; the module
files' own mentions of Core are rewritten the same way (`present_as`).
Lmod reads the cache of the current release through an lmodrc.lua naming
`<root>/current/lmod/cache` (ansible role `lmod`; `rc_text` here). How much it saves is
timed by the test bed's `iostack-testbed lmod-bench` (tools/testbed).
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil

from iostack.core import process

LMOD_LIBEXEC_DEFAULTS = ("/usr/share/lmod/lmod/libexec", "/opt/lmod/lmod/libexec")
UPDATE_SCRIPT = "update_lmod_system_cache_files"


#: Lmod releases whose spider cache (spiderT.lua) this module rewrites, as checked against a
#: walk through `current` (tests/integration/test_releases_lmod.py): Debian 12's 8.6 and 13's
#: 8.7. The cache's format is Lmod's own, not an interface: another release is refused.
KNOWN_LMOD = ("8.6.", "8.7.")


def libexec(lmod_cmd: str | None = None) -> pathlib.Path | None:
    """Lmod's libexec directory: beside `lmod_cmd` (LMOD_CMD), else the Debian or
    source-install path."""
    candidates = [pathlib.Path(lmod_cmd).parent] if lmod_cmd else []
    candidates += [pathlib.Path(p) for p in LMOD_LIBEXEC_DEFAULTS]
    return next((c for c in candidates if (c / UPDATE_SCRIPT).is_file()), None)


def cache_dir(tree: pathlib.Path) -> pathlib.Path:
    return tree / "lmod" / "cache"


def timestamp_file(tree: pathlib.Path) -> pathlib.Path:
    return tree / "lmod" / "timestamp"


def lmod_variables() -> list[str]:
    """The caller's loaded modules and Lmod settings, which the cache is made without (the
    child's environment, not configuration of iostack's)."""
    return [k for k in os.environ if k.startswith(("LMOD", "MODULE", "_ModuleTable", "__LMOD"))]


def lmod_version(lmod: pathlib.Path) -> str:
    """Lmod's version as `lmod --version` says it (`Version 8.6.19`), "" if it says none."""
    out = process.capture([lmod / "lmod", "--version"], env_remove=lmod_variables())
    m = re.search(r"Version (\d+\.\d+\.\d+)", out.stdout + out.stderr)
    return m.group(1) if m else ""


class UnknownLmod(RuntimeError):
    """An Lmod whose spider cache format this module was not checked against."""


def present_as(tree: pathlib.Path, seen_as: pathlib.Path) -> list[pathlib.Path]:
    """Make the module files of `tree` name its Core directory as users do (`seen_as`).
    Spack's module of a core compiler unlocks Core, by the path it was generated in (the
    release's): a same-named self-unlock Lmod takes in its stride, but with users on the
    `current` spelling Lmod 8.6 sees two directories, each unlocking the other's twin, and
    `module avail` and `module spider` die of a Lua stack overflow when they walk the tree.
    Run after `generate` (which walks the tree by its own path). Returns the files changed."""
    core = str(tree / "modulefiles" / "Core")
    pattern = re.compile(re.escape(core) + r'(?=")')
    changed = []
    for f in sorted((tree / "modulefiles").rglob("*.lua")):
        if f.is_symlink():
            continue
        text = f.read_text()
        new = pattern.sub(lambda _: str(seen_as), text)
        if new != text:
            f.write_text(new)
            changed.append(f)
    return changed


def generate(tree: pathlib.Path, seen_as: pathlib.Path,
             lmod_cmd: str | None = None) -> pathlib.Path:
    """Write the spider cache of `tree`/modulefiles/Core into `tree`/lmod, keyed by
    `seen_as` (the Core directory as users' MODULEPATH names it). Returns the cache dir.
    Then `present_as` makes the module files say the same. UnknownLmod for an Lmod not in
    KNOWN_LMOD (nothing written)."""
    lmod = libexec(lmod_cmd)
    if lmod is None:
        raise FileNotFoundError(f"{UPDATE_SCRIPT} not found in {', '.join(LMOD_LIBEXEC_DEFAULTS)} "
                                "or beside LMOD_CMD")
    version = lmod_version(lmod)
    if not version.startswith(KNOWN_LMOD):
        raise UnknownLmod(f"Lmod {version or '(no version)'} at {lmod}: its spider cache format "
                          f"is checked for Lmod {', '.join(v + 'x' for v in KNOWN_LMOD)} only "
                          "(lib/iostack/deployment/lmodcache.py KNOWN_LMOD)")
    core = tree / "modulefiles" / "Core"
    cache = cache_dir(tree)
    process.capture([lmod / UPDATE_SCRIPT, "-d", cache, "-t", timestamp_file(tree), core],
                    check=True, env_remove=lmod_variables())
    spider_lua = cache / "spiderT.lua"
    text = re.sub(re.escape(str(core)) + r'(?=[/"])', lambda _: str(seen_as), spider_lua.read_text())
    spider_lua.write_text(text)
    # the compiled copy Lmod reads first: compile the rewritten text again
    for compiled in cache.glob("spiderT.luac_*"):
        luac = shutil.which(f"luac{compiled.name.split('_', 1)[1]}") or shutil.which("luac")
        if luac:
            process.capture([luac, "-o", compiled, spider_lua], check=True)
        else:
            compiled.unlink()
    return cache


def rc_text(cache: pathlib.Path, timestamp: pathlib.Path) -> str:
    """An lmodrc.lua that makes Lmod read this system cache."""
    return ("-- iostack: the spider cache of the current release\n"
            f'scDescriptT = {{ {{ dir = "{cache}", timestamp = "{timestamp}" }} }}\n')
