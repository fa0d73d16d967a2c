#!/usr/bin/env python3
"""Archive GRIB with each FDB build's fdb-write, retrieve it with its fdb-read, and compare
every retrieved field with the input and with the other builds' fields, per message.

    fdb_roundtrip.py --work DIR --input FILE --request FILE --expect N
                     --build NAME=PREFIX[@EMULATOR] [--build ...]

Each build gets its own FDB root under DIR; `@EMULATOR` runs its programs through it (e.g.
`qemu-aarch64 -L /usr/aarch64-linux-gnu`, space-separated). fdb-read returns fields in
request order and exits 0 with an empty file when nothing matches, so the comparison
(iostack_rfm.jobs.gribcompare) matches messages by their MARS keys and counts them. Prints each
comparison's `gribcompare:` lines after a `roundtrip: compare A B` header, then
`roundtrip: RESULT=IDENTICAL` or `RESULT=DIFFERENT`; exits 0 only for IDENTICAL.
"""
from __future__ import annotations

import argparse
import itertools
import os
import pathlib
import shlex
import subprocess
import sys

# iostack and iostack_rfm as installed packages: pyproject.toml installs both into the venv
# (editable, this checkout), whose python runs this script (reframe-tests/checks/cross_aarch64.py)
from iostack.deployment import fdbconfig
from iostack_rfm.jobs import gribcompare

EM_NAMES = {62: "x86_64", 183: "aarch64"}


def elf_machine(path: pathlib.Path) -> str:
    head = path.read_bytes()[:20]
    if head[:4] != b"\x7fELF":
        return "not-elf"
    number = int.from_bytes(head[18:20], "little")
    return EM_NAMES.get(number, str(number))


def run(cmd: list, env: dict, log) -> int:
    print(f"+ {shlex.join(map(str, cmd))}", file=log, flush=True)
    return subprocess.run([str(c) for c in cmd], env=env, stdout=log, stderr=subprocess.STDOUT).returncode


def roundtrip(name: str, prefix: pathlib.Path, emulator: list[str], work: pathlib.Path,
              grib: pathlib.Path, request: pathlib.Path, schema: pathlib.Path) -> pathlib.Path:
    """fdb-write then fdb-read with one build; returns the retrieved file."""
    here = work / name
    here.mkdir(parents=True, exist_ok=True)
    config = here / "fdb-config.yaml"
    root = here / "root"
    root.mkdir(exist_ok=True)
    config.write_text(fdbconfig.render(root, schema))
    env = dict(os.environ, FDB5_CONFIG_FILE=str(config))
    out = here / "retrieved.grib"
    tools = {t: prefix / "bin" / t for t in ("fdb-write", "fdb-read")}
    for tool, path in tools.items():
        if not path.is_file():
            raise FileNotFoundError(f"{name}: {path} does not exist")
        print(f"roundtrip: build={name} tool={tool} machine={elf_machine(path)}")
    with open(here / "fdb.log", "w") as log:
        write_rc = run([*emulator, tools["fdb-write"], grib], env, log)
        read_rc = run([*emulator, tools["fdb-read"], request, out], env, log)
    print(f"roundtrip: build={name} fdb-write rc={write_rc} fdb-read rc={read_rc} log={here / 'fdb.log'}")
    if write_rc or read_rc:
        print((here / "fdb.log").read_text(errors="replace")[-2000:], file=sys.stderr)
    if not out.exists():  # compared as "nothing retrieved"
        out.write_bytes(b"")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="fdb_roundtrip", description=__doc__.splitlines()[0])
    ap.add_argument("--work", required=True, type=pathlib.Path)
    ap.add_argument("--input", required=True, type=pathlib.Path, help="GRIB file to archive")
    ap.add_argument("--request", required=True, type=pathlib.Path, help="fdb-read request file")
    ap.add_argument("--expect", required=True, type=int, help="number of fields retrieved")
    ap.add_argument("--build", required=True, action="append", metavar="NAME=PREFIX[@EMULATOR]")
    ap.add_argument("--schema", type=pathlib.Path, help="FDB schema (default: fdbconfig's search)")
    args = ap.parse_args(argv)
    builds = []
    for spec in args.build:
        name, sep, rest = spec.partition("=")
        prefix, _, emulator = rest.partition("@")
        if not sep or not name or not prefix:
            print(f"fdb_roundtrip: --build {spec!r} is not NAME=PREFIX[@EMULATOR]", file=sys.stderr)
            return 2
        builds.append((name, pathlib.Path(prefix), emulator.split()))
    for f in (args.input, args.request):
        if not f.is_file():
            print(f"fdb_roundtrip: {f} does not exist", file=sys.stderr)
            return 2
    try:
        schema = args.schema or fdbconfig.find_schema()
        outputs = {name: roundtrip(name, prefix, emu, args.work.resolve(), args.input.resolve(),
                                   args.request.resolve(), schema)
                   for name, prefix, emu in builds}
    except (FileNotFoundError, OSError) as e:
        print(f"fdb_roundtrip: {e}", file=sys.stderr)
        return 2
    # every build against the input, then every pair of builds
    pairs = [("input", args.input, name, out) for name, out in outputs.items()]
    pairs += [(a, outputs[a], b, outputs[b]) for a, b in itertools.combinations(outputs, 2)]
    identical = 0
    for ref_name, ref, cand_name, cand in pairs:
        print(f"roundtrip: compare {ref_name} {cand_name}", flush=True)
        try:
            same = gribcompare.compare(str(ref), str(cand), args.expect)
        except (gribcompare.GribFormatError, subprocess.CalledProcessError) as e:
            print(f"gribcompare: RESULT=ERROR {e}")
            same = False
        identical += same
    verdict = "IDENTICAL" if identical == len(pairs) else "DIFFERENT"
    print(f"roundtrip: comparisons={len(pairs)} identical={identical} RESULT={verdict}")
    return 0 if verdict == "IDENTICAL" else 1


if __name__ == "__main__":
    sys.exit(main())
