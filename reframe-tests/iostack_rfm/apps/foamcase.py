"""What an OpenFOAM run left in its case directory: written time directories, processor
directories, cell counts, and one digest over every written field file.

    python3 -m iostack_rfm.apps.foamcase summary CASE [--label NAME] [--top]

prints one line

    foamcase: label=serial processors=0 times=282 written=1 files=7 cells=12225 sha256=<hex>

`times` is the latest written time (0 excluded), `written` how many time directories were
written after 0 (in each processor directory when the case is decomposed: they must agree),
`files` and `sha256` cover every file under the written time directories (relative path and
content, in sorted order), so two runs wrote bit-identical output exactly when their digests
are equal. `cells` is the length of the internalField of the latest time's pressure field
(summed over processors). Standard library only.
"""
from __future__ import annotations

import argparse
import hashlib
import pathlib
import re
import sys

_INTERNAL = re.compile(rb"internalField\s+nonuniform\s+List<\w+>\s*(\d+)\s*\(")
_UNIFORM = re.compile(rb"internalField\s+uniform\b")


def is_time_name(name: str) -> bool:
    try:
        float(name)
    except ValueError:
        return False
    return True


def time_dirs(path: pathlib.Path) -> list[pathlib.Path]:
    """Written time directories after the initial one, in time order."""
    dirs = [p for p in path.iterdir() if p.is_dir() and is_time_name(p.name)
            and float(p.name) != 0]
    return sorted(dirs, key=lambda p: float(p.name))


def processor_dirs(case: pathlib.Path) -> list[pathlib.Path]:
    found = [p for p in case.iterdir() if p.is_dir() and re.fullmatch(r"processor\d+", p.name)]
    return sorted(found, key=lambda p: int(p.name[len("processor"):]))


def field_cells(path: pathlib.Path) -> int | None:
    """Number of values of a volume field's internalField (None if uniform or unknown)."""
    data = path.read_bytes()
    if m := _INTERNAL.search(data):
        return int(m.group(1))
    return None


def summarize(case, label: str = "", field: str = "p", top: bool = False) -> dict:
    """The summary of a case; `top` looks at the case's own time directories even where
    processor directories exist (a reconstructed case)."""
    case = pathlib.Path(case)
    procs = [] if top else processor_dirs(case)
    roots = procs or [case]
    per_root = [time_dirs(r) for r in roots]
    written = {len(t) for t in per_root}
    latest = {t[-1].name if t else "none" for t in per_root}
    digest = hashlib.sha256()
    files = 0
    for times in per_root:
        for t in times:
            for f in sorted(p for p in t.rglob("*") if p.is_file()):
                digest.update(str(f.relative_to(case)).encode() + b"\0")
                digest.update(hashlib.sha256(f.read_bytes()).digest())
                files += 1
    cells = 0
    for times in per_root:
        target = times[-1] / field if times else None
        n = field_cells(target) if target and target.is_file() else None
        if n is None:
            cells = None
            break
        cells += n
    return {
        "label": label or case.name,
        "processors": len(procs),
        # processors that disagree on what they wrote show as several values
        "times": ",".join(sorted(latest)),
        "written": ",".join(str(n) for n in sorted(written)),
        "files": files,
        "cells": "unknown" if cells is None else cells,
        "sha256": digest.hexdigest() if files else "none",
    }


def format_line(summary: dict) -> str:
    return "foamcase: " + " ".join(f"{k}={v}" for k, v in summary.items())


def parse_line(line: str) -> dict:
    return dict(kv.split("=", 1) for kv in line.removeprefix("foamcase:").split())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="foamcase", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary")
    s.add_argument("case", type=pathlib.Path)
    s.add_argument("--label", default="")
    s.add_argument("--field", default="p")
    s.add_argument("--top", action="store_true",
                   help="the case's own time directories, not its processor directories")
    args = ap.parse_args(argv)
    if not args.case.is_dir():
        print(f"foamcase: error: {args.case} is not a directory", file=sys.stderr)
        return 2
    print(format_line(summarize(args.case, args.label, args.field, args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
