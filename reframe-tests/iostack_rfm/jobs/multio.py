"""MultIO, the IFS I/O server library, writing GRIB into FDB: the job-side half of
checks/multio_fdb.py. Standard library only (ecCodes' tools from PATH).

    python3 -m iostack_rfm.jobs.multio split GRIB DIR [--skip K]
    python3 -m iostack_rfm.jobs.multio sinks OUT
    python3 -m iostack_rfm.jobs.multio hammer-config OUT --params N
    python3 -m iostack_rfm.jobs.multio hammer --config CFG --template GRIB --nsteps S \
        --members M --fdb-root ROOT

OpenIFS 48r1 writes its output through MultIO's IFS interface (ifs-source
ifsaux/module/fdbsubs_mod.F90): IMULTIO_WRITE(grib, words) per encoded field, then
IMULTIO_FLUSH; MultIO hands each message to the sinks of its configuration
(MULTIO_CONFIG_FILE), here FDB's. multio 1.5.1 ships one program that makes exactly these
two calls, `multio-sink FILE`: the first message of FILE, written and flushed. `split`
cuts a GRIB file into one file per message (DIR/000000.grib, ...), so that multio-sink
writes each of them; `--skip K` leaves message K out (the missing-field control). `sinks`
writes the MultIO configuration of one FDB sink (FDB reads FDB5_CONFIG_FILE).

multio-hammer (1.5.1, transport `none`) is MultIO's own load generator: from one template
message it makes a field per step, level and parameter of its configuration, pushes each
through a plan (a Sink action with the FDB sink) and ends each step with a flush.
`hammer-config` writes that configuration (surface parameters only: one field per
parameter and step, as FDB's throughput check's workload). multio-hammer prints no
statistics of its own: `hammer` runs it once per ensemble member and prints, in
fdb-hammer's `Name: value` form, the fields and bytes FDB's data files hold afterwards
(ecCodes counts the messages in them), the flushes (one per step and member) and the
hammer's wall time, so that iostack_rfm.parsers.fdb reads either writer alike.
"""
from __future__ import annotations

import argparse
import os
import sys

from iostack_rfm.jobs import gribcompare

#: the MultIO configuration of one FDB sink: FDB itself reads FDB5_CONFIG_FILE
SINKS_YAML = """\
# MultIO's IFS interface (imultio_write_): every message to FDB
sinks:
  - type: fdb5
    config: {}
"""

#: surface parameters multio-hammer sets on the template (ecCodes paramIds that GRIB2
#: encodes on any level type)
HAMMER_PARAMS = (129, 130, 131, 132, 133, 134, 135, 136, 137, 138, 139, 140)


def split(path: str, out_dir: str, skip: int | None = None) -> tuple[int, int]:
    """One file per message of `path` in `out_dir`, message `skip` left out; returns (the
    file's messages, files written)."""
    messages = gribcompare.read(path)
    if skip is not None and not 0 <= skip < len(messages):
        raise gribcompare.GribError(f"{path} has {len(messages)} messages, no message {skip}")
    os.makedirs(out_dir, exist_ok=True)
    written = 0
    for m, body in zip(messages, gribcompare.message_bytes(path, messages), strict=True):
        if m.index == skip:
            continue
        with open(os.path.join(out_dir, f"{m.index:06d}.grib"), "wb") as f:
            f.write(body)
        written += 1
    return len(messages), written


def hammer_config(nparams: int) -> str:
    """multio-hammer's configuration: no transport (plans run in the hammer's process),
    `nparams` surface parameters, one plan whose Sink action archives into FDB."""
    if not 1 <= nparams <= len(HAMMER_PARAMS):
        raise ValueError(f"nparams must be 1 to {len(HAMMER_PARAMS)}")
    params = ", ".join(map(str, HAMMER_PARAMS[:nparams]))
    return ("transport : none\n"
            "parameters :\n  ml : []\n  pl : []\n"
            f"  sfc : [{params}]\n"
            "plans :\n  - name : fdb\n    actions :\n      - type : Sink\n"
            "        sinks :\n          - type : fdb5\n            config : {}\n")


def archived(fdb_root: str) -> tuple[int, int]:
    """(GRIB messages, bytes) in FDB's data files under `fdb_root`: what was archived."""
    fields = size = 0
    for d, _, files in os.walk(fdb_root):
        for name in files:
            if name.endswith(".data"):
                path = os.path.join(d, name)
                fields += len(gribcompare.read(path))
                size += os.path.getsize(path)
    return fields, size


def hammer(config: str, template: str, nsteps: int, members: int, fdb_root: str,
           program: str = "multio-hammer") -> str:
    """Run multio-hammer once per member (1..members), `nsteps` steps each; its statistics
    as fdb-hammer prints them. Raises OSError naming the run that failed."""
    import subprocess
    import time

    seconds = 0.0
    for member in range(1, members + 1):
        cmd = [program, f"--config={config}", f"--nbsteps={nsteps}", "--nblevels=1",
               f"--member={member}", template]
        start = time.monotonic()
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL)
        seconds += time.monotonic() - start
        if p.returncode != 0:
            raise OSError(f"{' '.join(cmd)} exited with {p.returncode}")
    fields, size = archived(fdb_root)
    return (f"Fields written: {fields}\nBytes written: {size}\n"
            f"Flushes: {members * nsteps}\nWriting duration: {seconds:.6f}\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="multio", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("split")
    s.add_argument("grib")
    s.add_argument("dir")
    s.add_argument("--skip", type=int, help="0-based index of a message to leave out")
    c = sub.add_parser("sinks")
    c.add_argument("out")
    h = sub.add_parser("hammer-config")
    h.add_argument("out")
    h.add_argument("--params", type=int, required=True)
    r = sub.add_parser("hammer")
    r.add_argument("--config", required=True)
    r.add_argument("--template", required=True)
    r.add_argument("--nsteps", type=int, required=True)
    r.add_argument("--members", type=int, default=1)
    r.add_argument("--fdb-root", required=True)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "split":
            total, written = split(args.grib, args.dir, args.skip)
            print(f"multio: split {args.grib}: messages={total} files={written}"
                  + (f" skipped={args.skip}" if args.skip is not None else ""))
        elif args.cmd == "sinks":
            with open(args.out, "w") as f:
                f.write(SINKS_YAML)
        elif args.cmd == "hammer-config":
            with open(args.out, "w") as f:
                f.write(hammer_config(args.params))
        else:
            print(hammer(args.config, args.template, args.nsteps, args.members,
                         args.fdb_root), end="")
        return 0
    except (gribcompare.GribError, OSError, ValueError) as e:
        print(f"multio: ERROR {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
