"""Retrieve a GRIB file's fields back from FDB by MARS request, with whichever FDB is on PATH.

    python3 -m iostack_rfm.jobs.fdbretrieve REFERENCE OUT

One `fdb-read` per MARS key set of REFERENCE (`gribcompare.requests`), their outputs
concatenated into OUT. Some FDBs cannot expand some requests: FDB 5.10.8 (metkit 1.9)
fails on stream=enda and stream=moda ("cannot find a context to expand 'param'") and on
class=ti ("Ambiguous value 'ti'"). Then the request is retrieved again with `fdb-read
--raw` (no expansion: every key as ecCodes reads it from the GRIB, which is how FDB indexed
it), and a line names the stream and class and quotes fdb-read's error:

    fdbretrieve: request 1 stream=enda class=ea: fdb-read cannot expand it (...); retrieved with --raw
    fdbretrieve: requests=2 expanded=1 raw=1

Exits 1, naming the request, when fdb-read fails with --raw too. Standard library only.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

from iostack_rfm.jobs import gribcompare


def _error_line(output: str) -> str:
    """fdb-read's own error message (its first `Exception:` line, else its last line),
    without the request it repeats."""
    lines = output.strip().splitlines() or ["no output"]
    line = next((x for x in lines if x.startswith("Exception:")), lines[-1])
    return re.split(r" in retrieve,| request=", line.removeprefix("Exception:"))[0].strip()


def _fdb_read(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["fdb-read", *args], capture_output=True, text=True)


def retrieve(reference: str, out: str, say=print) -> bool:
    requests = gribcompare.requests(gribcompare.read(reference))
    raw = 0
    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(out))) as tmp, \
            open(out, "wb") as target:
        for i, request in enumerate(requests, 1):
            req, part = os.path.join(tmp, f"{i}.req"), os.path.join(tmp, f"{i}.grib")
            with open(req, "w") as f:
                f.write(request + "\n")
            p = _fdb_read(req, part)
            if p.returncode != 0:
                what = " ".join(re.findall(r"\b(?:stream|class)=[^,]*", request))
                expanded_error = _error_line(p.stdout + p.stderr)
                p = _fdb_read("--raw", req, part)
                if p.returncode != 0:
                    say(f"fdbretrieve: request {i} {what}: fdb-read failed ({expanded_error}), "
                        f"with --raw too ({_error_line(p.stdout + p.stderr)}): {request}")
                    return False
                raw += 1
                say(f"fdbretrieve: request {i} {what}: fdb-read cannot expand it "
                    f"({expanded_error}); retrieved with --raw")
            if os.path.exists(part):
                with open(part, "rb") as f:
                    shutil.copyfileobj(f, target)
    say(f"fdbretrieve: requests={len(requests)} expanded={len(requests) - raw} raw={raw}")
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="fdbretrieve", description=__doc__.splitlines()[0])
    ap.add_argument("reference")
    ap.add_argument("out")
    args = ap.parse_args(argv)
    try:
        return 0 if retrieve(args.reference, args.out) else 1
    except (gribcompare.GribError, OSError) as e:
        print(f"fdbretrieve: ERROR {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
