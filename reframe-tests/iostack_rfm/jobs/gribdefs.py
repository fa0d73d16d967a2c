"""Refuse GRIB whose parameters ecCodes cannot name, before it goes into FDB.

    python3 -m iostack_rfm.jobs.gribdefs check FILE

A site's GRIB may hold parameters only its own ecCodes definitions name (a local parameter
of its centre: GRIB2 discipline 0, parameterCategory 1, parameterNumber 192..254, ...;
sites/<site>.yaml `grib_definitions`, put on ecCodes' search path by the site's ecCodes
module and ReFrame environments as ECCODES_EXTRA_DEFINITION_PATH). Without them ecCodes
reads such a field as paramId 0, shortName `unknown`, and FDB 5.10.8 archives it all the
same under param=0, where nobody asking for the parameter finds it. `check` exits 0 with

    gribdefs: OK FILE messages=N params=233001/iotp,...

when ecCodes names the parameter of every message, else 2 with one line naming the first
message it cannot name, how many such there are and the definition path it searched; a
directory of ECCODES_EXTRA_DEFINITION_PATH that is missing on the node is named in one line
too. Standard library only; ecCodes' grib_ls and codes_info come from PATH.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

from iostack_rfm.jobs import gribcompare

#: ecCodes' variable of definition directories searched before its own
EXTRA = "ECCODES_EXTRA_DEFINITION_PATH"
#: what identifies a parameter in the message, per edition
IDENTITY = {"1": ("table2Version", "indicatorOfParameter"),
            "2": ("discipline", "parameterCategory", "parameterNumber")}
#: what ecCodes answers for a parameter its definitions do not name
UNNAMED = {"0", "unknown", "not_found", ""}


class DefinitionsMissing(ValueError):
    pass


def search_path(environ=os.environ) -> str:
    """The definition path ecCodes searches here (codes_info -d: the extra path first)."""
    p = subprocess.run(["codes_info", "-d"], capture_output=True, text=True, env=environ)
    return p.stdout.strip() or "(codes_info -d printed nothing)"


def missing_extra_dirs(environ=os.environ) -> list[str]:
    """The entries of ECCODES_EXTRA_DEFINITION_PATH that are no directory on this node."""
    return [d for d in environ.get(EXTRA, "").split(":") if d and not os.path.isdir(d)]


def check(path: str, environ=os.environ) -> str:
    """The OK line; DefinitionsMissing (its one line) when ecCodes cannot name a parameter."""
    missing = missing_extra_dirs(environ)
    if missing:
        raise DefinitionsMissing(
            f"{EXTRA} names {', '.join(missing)}, no directory on this node: the site's "
            "grib_definitions (sites/<site>.yaml) are not installed here")
    keys = ["edition", "centre", "paramId", "shortName",
            *sorted({k for ks in IDENTITY.values() for k in ks})]
    messages = gribcompare._grib_ls(path, "-p", ",".join(keys))
    if not messages:
        raise DefinitionsMissing(f"{path}: no GRIB messages")
    unnamed = [(i, m) for i, m in enumerate(messages)
               if m["paramId"] in UNNAMED or m["shortName"] in UNNAMED]
    if unnamed:
        i, m = unnamed[0]
        identity = " ".join(f"{k} {m[k]}" for k in IDENTITY.get(m["edition"], ()))
        raise DefinitionsMissing(
            f"{path}: {len(unnamed)} of {len(messages)} messages hold a parameter no ecCodes "
            f"definition names (message {i}: GRIB{m['edition']} centre {m['centre']} "
            f"{identity} reads as paramId {m['paramId']}, shortName {m['shortName']}); "
            f"definitions searched: {search_path(environ)}; the site's own definitions "
            "(sites/<site>.yaml grib_definitions) are not on ecCodes' path: load the site's "
            "ecCodes module")
    params = list(dict.fromkeys(f"{m['paramId']}/{m['shortName']}" for m in messages))
    return f"{path} messages={len(messages)} params={','.join(params)}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="gribdefs", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("check").add_argument("file")
    args = ap.parse_args(argv)
    try:
        print(f"gribdefs: OK {check(args.file)}")
        return 0
    except (DefinitionsMissing, gribcompare.GribError, OSError) as e:
        print(f"gribdefs: ERROR {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
