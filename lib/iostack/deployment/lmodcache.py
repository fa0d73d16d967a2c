"""Lmod spider cache of a release, and a harness timing `module avail` and `module spider`
with and without it.

Lmod keys its cache by the MODULEPATH directory as users spell it, and users spell
`<root>/current/modulefiles/Core`. A release is built before `current` points at it, so its
cache is generated from the release's own path (Lmod's update_lmod_system_cache_files) and
that Core path is then rewritten to the `current` one: the result is byte for byte what a
walk through `current` gives (tests/integration/test_releases_lmod.py compares them). The
lower levels of the hierarchy keep the release's own paths, as Spack's modules put those on
MODULEPATH, so a job that loaded an MPI stays in its release after a switch; the module
files' own mentions of Core are rewritten the same way (`present_as`).
Lmod reads the cache of the current release through an lmodrc.lua naming
`<root>/current/lmod/cache` (ansible role `lmod`; `rc_text` here):

    python3 -m iostack.deployment.lmodcache bench [--root DEPLOYMENT] [--generated 2000] [--runs 10]

times both commands on the deployment's current tree and on a generated tree of about 2,000
modules (a mid-sized centre), with hyperfine, and prints the medians with their spread.
Standard library only, so any python3 runs it (PYTHONPATH=<repo>/lib).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

from iostack.core import process
LMOD_LIBEXEC_DEFAULTS = ("/usr/share/lmod/lmod/libexec", "/opt/lmod/lmod/libexec")
UPDATE_SCRIPT = "update_lmod_system_cache_files"


def libexec() -> pathlib.Path | None:
    """Lmod's libexec directory: beside LMOD_CMD, else the Debian or source-install path."""
    candidates = [pathlib.Path(os.environ["LMOD_CMD"]).parent] if os.environ.get("LMOD_CMD") else []
    candidates += [pathlib.Path(p) for p in LMOD_LIBEXEC_DEFAULTS]
    return next((c for c in candidates if (c / UPDATE_SCRIPT).is_file()), None)


def cache_dir(tree: pathlib.Path) -> pathlib.Path:
    return tree / "lmod" / "cache"


def timestamp_file(tree: pathlib.Path) -> pathlib.Path:
    return tree / "lmod" / "timestamp"


def lmod_variables() -> list[str]:
    """The caller's loaded modules and Lmod settings, which the cache is made without."""
    return [k for k in os.environ if k.startswith(("LMOD", "MODULE", "_ModuleTable", "__LMOD"))]


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


def generate(tree: pathlib.Path, seen_as: pathlib.Path) -> pathlib.Path:
    """Write the spider cache of `tree`/modulefiles/Core into `tree`/lmod, keyed by
    `seen_as` (the Core directory as users' MODULEPATH names it). Returns the cache dir.
    Then `present_as` makes the module files say the same."""
    lmod = libexec()
    if lmod is None:
        raise FileNotFoundError(f"{UPDATE_SCRIPT} not found in {', '.join(LMOD_LIBEXEC_DEFAULTS)} "
                                "or beside LMOD_CMD")
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


# --- a generated tree -------------------------------------------------------------------

MODULE = """-- -*- lua -*-
-- generated stand-in for a Spack module ({name}@{version})
whatis([[Name : {name}]])
whatis([[Version : {version}]])
whatis([[Short description : {name}, a stand-in package of a generated tree]])
help([[Name   : {name}]])
help([[Version: {version}]])
{unlock}prepend_path("PATH", "/opt/generated/{name}-{version}/bin", ":")
prepend_path("LD_LIBRARY_PATH", "/opt/generated/{name}-{version}/lib", ":")
prepend_path("CMAKE_PREFIX_PATH", "/opt/generated/{name}-{version}/.", ":")
setenv("{var}_ROOT", "/opt/generated/{name}-{version}")
"""


def _module(top: pathlib.Path, level: str, name: str, version: str, unlock: str = "",
            family: str = "") -> None:
    f = top / level / name / f"{version}.lua"
    f.parent.mkdir(parents=True, exist_ok=True)
    lines = (f'family("{family}")\n' if family else "") + (
        f'prepend_path("MODULEPATH", "{top / unlock}")\n' if unlock else "")
    f.write_text(MODULE.format(name=name, version=version, unlock=lines,
                               var=name.upper().replace("-", "_")))


def synthetic_tree(top: pathlib.Path, modules: int = 2000, compilers: int = 4,
                   mpis: int = 2) -> int:
    """A Core / compiler / MPI hierarchy like Spack's with about `modules` modulefiles:
    a fifth in Core, three tenths per compiler, the rest per compiler and MPI. Returns
    the number written."""
    core_tools = max(1, round(0.2 * modules))
    per_compiler = max(1, round(0.3 * modules / compilers))
    per_mpi = max(1, round((modules - compilers - core_tools - compilers * (mpis + per_compiler))
                           / (compilers * mpis)))
    # Spack's module of the core compiler unlocks Core itself
    _module(top, "Core", "gcc", "12.2.0", unlock="Core")
    written = 1
    for i in range(core_tools):
        _module(top, "Core", f"tool{i:04d}", f"{1 + i % 3}.{i % 7}.0")
        written += 1
    for c in range(compilers):
        comp = f"gcc/{11 + c}.{c}.0"
        _module(top, "Core", *comp.split("/"), unlock=comp, family="compiler")
        written += 1
        for m in range(mpis):
            mpi = f"openmpi/{4 + m}.1.{c}"
            _module(top, comp, *mpi.split("/"), unlock=f"{mpi}/{comp}", family="mpi")
            written += 1
            for i in range(per_mpi):
                _module(top, f"{mpi}/{comp}", f"plib{i:04d}", f"{1 + i % 4}.{m}.0")
                written += 1
        for i in range(per_compiler):
            _module(top, comp, f"lib{i:04d}", f"{1 + i % 5}.{c}.0")
            written += 1
    return written


# --- the timing harness -------------------------------------------------------------------

def _deployment_like(base: pathlib.Path, modules: int) -> tuple[pathlib.Path, int]:
    """A generated tree laid out like a deployment: releases/gen/modulefiles, current ->
    releases/gen, and its cache made by `generate` as deploy makes it."""
    release = base / "releases" / "gen"
    count = synthetic_tree(release / "modulefiles", modules)
    (base / "current").symlink_to(pathlib.Path("releases") / "gen")
    generate(release, base / "current" / "modulefiles" / "Core")
    present_as(release, base / "current" / "modulefiles" / "Core")
    return base, count


def commands(root: pathlib.Path, home: pathlib.Path, rc: pathlib.Path) -> dict[str, str]:
    """{label: command} for avail and spider, with and without the cache, in a clean
    environment (an empty HOME, so no personal cache of Lmod's counts)."""
    lmod = libexec() / "lmod"
    base = (f"env -i HOME={home} PATH=/usr/bin:/bin TERM=dumb "
            f"MODULEPATH={root / 'current' / 'modulefiles' / 'Core'}")
    # LMOD_IGNORE_CACHE: neither the system cache nor a personal one is read or written
    setups = {"cache": f"LMOD_RC={rc}", "no cache": "LMOD_IGNORE_CACHE=1"}
    # not terse (-t): Lmod's terse listings always walk the tree
    return {f"{sub} ({name})": f"{base} {setup} {lmod} bash {sub}"
            for sub in ("avail", "spider") for name, setup in setups.items()}


def failure(cmd: str) -> str | None:
    """Why a command fails (its exit status and first line of error), None if it works."""
    proc = subprocess.run(cmd.split(), capture_output=True, text=True)
    if proc.returncode == 0:
        return None
    first = next((line.strip() for line in proc.stderr.splitlines() if line.strip()), "")
    return f"fails (rc {proc.returncode}): {first[:100]}"


def bench(trees: dict[str, pathlib.Path], runs: int, work: pathlib.Path) -> list[dict]:
    """Time each tree's commands with hyperfine; one row per (tree, command). A command
    that fails is not timed: its row says why."""
    hyperfine = shutil.which("hyperfine")
    if not hyperfine:
        raise FileNotFoundError("hyperfine not found (Debian: apt-get install hyperfine)")
    rows = []
    for label, root in trees.items():
        rc = work / f"{label}.lmodrc.lua"
        rc.write_text(rc_text(root / "current" / "lmod" / "cache",
                              root / "current" / "lmod" / "timestamp"))
        home = work / "home"
        home.mkdir(exist_ok=True)
        modules = sum(1 for _ in (root / "current" / "modulefiles").rglob("*.lua"))
        cmds = commands(root, home, rc)
        failed = {name: why for name, cmd in cmds.items() if (why := failure(cmd))}
        timed = {name: cmd for name, cmd in cmds.items() if name not in failed}
        results = {}
        if timed:
            out = work / f"{label}.json"
            subprocess.run([hyperfine, "--shell=none", "--warmup", "1", "--runs", str(runs),
                            "--export-json", str(out), "--style", "basic",
                            *[a for name, cmd in timed.items() for a in ("-n", name, cmd)]],
                           check=True, stdout=subprocess.DEVNULL)
            results = {r["command"]: r for r in json.loads(out.read_text())["results"]}
        for name in cmds:
            row = {"tree": label, "modules": modules, "command": name}
            if name in results:
                r = results[name]
                row.update(median_s=r["median"], min_s=r["min"], max_s=r["max"], runs=len(r["times"]))
            else:
                row["error"] = failed[name]
            rows.append(row)
    return rows


def format_rows(rows: list[dict]) -> str:
    lines = [f"{'tree':<12} {'modules':>7}  {'command':<20} {'median s':>9} {'min s':>8} "
             f"{'max s':>8} {'runs':>4}"]
    for r in rows:
        head = f"{r['tree']:<12} {r['modules']:>7}  {r['command']:<20} "
        if "error" in r:
            lines.append(head + r["error"])
        else:
            lines.append(head + f"{r['median_s']:>9.3f} {r['min_s']:>8.3f} {r['max_s']:>8.3f} "
                                f"{r['runs']:>4}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m iostack.deployment.lmodcache", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bench", help="time module avail/spider with and without the cache")
    b.add_argument("--root", type=pathlib.Path,
                   help="a deployment whose current release to time (default: none)")
    b.add_argument("--generated", type=int, default=2000, metavar="N",
                   help="also time a generated tree of about N modules (0: none; default 2000)")
    b.add_argument("--runs", type=int, default=10, help="timed runs per command (default 10)")
    b.add_argument("--json", type=pathlib.Path, help="also write the rows here")
    args = ap.parse_args(argv)
    if libexec() is None:
        print(f"lmodcache: error: Lmod's {UPDATE_SCRIPT} not found", file=sys.stderr)
        return 2
    if args.root and not (args.root / "current" / "lmod" / "cache").is_dir():
        print(f"lmodcache: error: {args.root}/current has no spider cache (lmod/cache): "
              "is it a deployment with releases?", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="iostack-lmodbench-") as tmp:
        work = pathlib.Path(tmp)
        trees = {"deployment": args.root.resolve()} if args.root else {}
        if args.generated > 0:
            trees["generated"], _ = _deployment_like(work / "generated", args.generated)
        if not trees:
            print("lmodcache: error: nothing to time: give --root or --generated N", file=sys.stderr)
            return 2
        try:
            rows = bench(trees, args.runs, work)
        except FileNotFoundError as e:
            print(f"lmodcache: error: {e}", file=sys.stderr)
            return 2
    print(format_rows(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
