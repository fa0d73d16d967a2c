"""Render an FDB5 config from the repository's template: for one check's run (in the job,
`PYTHONPATH=<repo>/lib python3 -m iostack.deployment.fdbconfig`) and for a deployment (`bin/iostack
deploy`, in process). Standard library only.

    python3 -m iostack.deployment.fdbconfig --root DIR --out FILE [--schema PATH]

The schema is found where the FDB in use installed it: FDB5_SCHEMA if set, then
$FDB_ROOT/etc/fdb/schema (Spack installs; the module sets FDB_ROOT), then /etc/fdb/schema
(Debian). The root directory is created. Prints the path written.
"""
from __future__ import annotations

import argparse
import os
import pathlib
from collections.abc import Mapping
import string
import sys

TEMPLATE = pathlib.Path(__file__).with_name("templates") / "fdb-config.yaml"


def find_schema(environ: Mapping[str, str]) -> pathlib.Path:
    """FDB5_SCHEMA, else $FDB_ROOT/etc/fdb/schema, else the node's /etc/fdb/schema."""
    candidates = []
    if environ.get("FDB5_SCHEMA"):
        candidates.append(pathlib.Path(environ["FDB5_SCHEMA"]))
    if environ.get("FDB_ROOT"):
        candidates.append(pathlib.Path(environ["FDB_ROOT"]) / "etc/fdb/schema")
    candidates.append(pathlib.Path("/etc/fdb/schema"))
    for c in candidates:
        if c.is_file():
            return c
    raise FileNotFoundError("no FDB schema found; tried " + ", ".join(map(str, candidates)))


def render(root: pathlib.Path, schema: pathlib.Path) -> str:
    return string.Template(TEMPLATE.read_text()).substitute(root=root, schema=schema)


def write(root: pathlib.Path, out: pathlib.Path, schema: pathlib.Path) -> None:
    """Create the FDB root and write its config to `out`."""
    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    out.write_text(render(root, schema))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="fdbconfig")
    ap.add_argument("--root", required=True, type=pathlib.Path)
    ap.add_argument("--out", required=True, type=pathlib.Path)
    ap.add_argument("--schema", type=pathlib.Path)
    args = ap.parse_args(argv)
    try:
        write(args.root, args.out, args.schema or find_schema(os.environ))
    except FileNotFoundError as e:
        print(f"fdbconfig: {e}", file=sys.stderr)
        return 2
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
