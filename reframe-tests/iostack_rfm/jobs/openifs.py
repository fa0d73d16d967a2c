"""OpenIFS ([OIFS-HECToR]): the test cases, the namelist switches the check sets, the run logs
(ifs.stat, NODE.001_01) and their speed metric, and the job-side comparison of a run's GRIB
files with what the FDB run archived. Standard library only (plus ecCodes' and FDB's
command-line tools in the job).

    python3 -m iostack_rfm.jobs.openifs namelist fort.4 --set NAMCT0:LFDBOP=true ...
    python3 -m iostack_rfm.jobs.openifs compare-fdb GRIB_RUN_DIR --fdb-root DIR

`compare-fdb` takes every output file of the GRIB run, ICMGG<exp>+<step> (grid point),
ICMSH<exp>+<step> (spectral) and ICMUA<exp>+<step> (upper-air grid point, where Full-POS
writes them), retrieves the same fields from FDB (`fdb-read --extract`: the
request is the file's own MARS keys; FDB5_CONFIG_FILE names the FDB run's config) and
compares them message by message with iostack_rfm.jobs.gribcompare (counts, bytes, sha256,
grib_compare). [OIFS-HECToR] also found the total bytes equal: the FDB data files (*.data, FDB4's
*.dat) must hold exactly the bytes of the files' messages (the files pad each message to
whole 4-byte words, which are not the message's), and FDB must list exactly as many fields
as the files hold. The last line says it all:

    oifs-output: files=14 steps=7 messages=812 identical=812 fdb_fields=812 bytes_grib=N
    bytes_fdb=N RESULT=IDENTICAL

Speed is [OIFS-HECToR]'s metric, forecast days per wall-clock day = forecast length in days *
86400 / wall seconds. ifs.stat gets one line per model step (and a few per setup stage)
from the master task:

   10:21:05 AAAA00AAA STEPO                  12    1.912    1.911    1.953      0:25      0:26 0.18327498815721E-04  ...
   |        |         |                      |     |        |        |          |         |    |
   clock    config    caller              step  vector   cpu of   wall of    cpu so    wall so  norm(s), then memory
            flags                                 cpu      the step the step   far m:ss  far m:ss and energy columns

(layout of IFS's OPDIS routine; older cycles lack the trailing memory columns, which are
not read). NODE.001_01 holds the model's log, with a line per step from LOGDIS:

   10:21:05 STEP   12 H=   3:00 +CPU=  1.953

where H= is the forecast time reached (hours:minutes).
"""
from __future__ import annotations

import argparse
import io
import os
import pathlib
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from iostack_rfm.jobs import gribcompare


@dataclass(frozen=True)
class Case:
    """A [OIFS-HECToR] test case (Table 2): its MPI x OpenMP layout on HECToR."""

    name: str
    mpi_tasks: int
    threads: int
    #: "Baseline wall time", minutes (of one run)
    baseline_minutes: int

    @property
    def cores(self) -> int:
        return self.mpi_tasks * self.threads


# [OIFS-HECToR], Table 2; forecast days per day are in reframe-tests/references/openifs.yaml
CASES = {
    "T159": Case("T159", 16, 8, 5),
    "T511": Case("T511", 128, 8, 9),
    "T1279": Case("T1279", 512, 8, 17),
    "T1279_op": Case("T1279_op", 512, 8, 26),
}

# ICMUA: upper-air grid-point fields, which Full-POS writes apart from the surface's ICMGG
# when NFPOS=2 (suecfname.F90)
OUTPUT_FILE = re.compile(r"^ICM(?P<kind>GG|SH|UA)(?P<exp>\w{4})\+(?P<step>\d{6})$")
# Lustre striping as the check's parameter spells it: "<count>x<size>", e.g. 8x16M
STRIPE = re.compile(r"^(?P<count>-?\d+)x(?P<size>\d+[KMG])$")


def stripe_options(stripe: str) -> list[str] | None:
    """`lfs setstripe` options for a stripe parameter, None for `inherit` (the directory's)."""
    if stripe == "inherit":
        return None
    m = STRIPE.match(stripe)
    if not m:
        raise ValueError(f"stripe {stripe!r}: expected inherit or <count>x<size>, e.g. 4x4M")
    return ["-c", m["count"], "-S", m["size"]]


def fortran_value(value) -> str:
    if isinstance(value, bool):
        return ".true." if value else ".false."
    if isinstance(value, (int, float)):
        return str(value)
    text = str(value)
    low = text.lower()
    if low in ("true", ".true.", "t", ".t."):
        return ".true."
    if low in ("false", ".false.", "f", ".f."):
        return ".false."
    if re.fullmatch(r"[-+]?\d+(\.\d*)?([eEdD][-+]?\d+)?", text) or text.startswith(("'", '"')):
        return text
    return f"'{text}'"


def set_namelist(text: str, group: str, key: str, value) -> str:
    """Set `key` in namelist group `group` (&GROUP ... /) of a Fortran namelist file: the
    assignment is replaced where it starts a line, else added at the end of the group; a
    missing group is appended."""
    value = fortran_value(value)
    start = re.search(rf"(?im)^[ \t]*&{re.escape(group)}\b.*$", text)
    if not start:
        return text.rstrip("\n") + f"\n &{group.upper()}\n   {key.upper()}={value},\n /\n"
    end = re.compile(r"(?m)^[ \t]*(/|&END\b)").search(text, start.end())
    if not end:
        raise ValueError(f"namelist group &{group} has no end (/)")
    body = text[start.end():end.start()]
    assignment = re.compile(rf"(?im)^([ \t]*){re.escape(key)}[ \t]*=[^,\n]*,?")
    if assignment.search(body):
        body = assignment.sub(lambda m: f"{m.group(1)}{key.upper()}={value},", body, count=1)
    else:
        body = body.rstrip("\n") + f"\n   {key.upper()}={value},\n"
    return text[:start.end()] + body + text[end.start():]


def output_files(run_dir) -> dict[str, list[pathlib.Path]]:
    """The run's output files by kind (GG, SH, UA), in step order."""
    found: dict[str, list[pathlib.Path]] = {"GG": [], "SH": [], "UA": []}
    for p in sorted(pathlib.Path(run_dir).iterdir()):
        if m := OUTPUT_FILE.match(p.name):
            found[m["kind"]].append(p)
    return found


def experiments_of(run_dir) -> set[str]:
    return {m["exp"] for p in pathlib.Path(run_dir).iterdir() if (m := OUTPUT_FILE.match(p.name))}


def fdb_data_bytes(fdb_root) -> int:
    """Bytes of the FDB's data files (FDB5 *.data, FDB4 *.dat): the archived GRIB."""
    return sum(p.stat().st_size for p in pathlib.Path(fdb_root).rglob("*")
               if p.is_file() and p.suffix in (".data", ".dat"))


def fdb_field_count() -> int:
    """Fields FDB lists in all its databases (the config in the environment)."""
    out = subprocess.run(["fdb-list", "--all", "--minimum-keys=", "--porcelain"],
                         check=True, capture_output=True, text=True).stdout
    return sum(1 for line in out.splitlines() if line.startswith("{"))


_COUNTS = re.compile(r"matched=(\d+) missing=(\d+) extra=(\d+) identical=(\d+) differing=(\d+)")


def compare_with_fdb(run_dir, fdb_root, out=sys.stdout) -> bool:
    """Compare every GRIB output file of `run_dir` with the same fields from FDB."""
    def say(line):
        print(f"oifs-output: {line}", file=out, flush=True)

    files = output_files(run_dir)
    every = sorted(files["GG"] + files["SH"] + files["UA"], key=lambda p: (p.name[5:], p.name))
    steps = {p.name[-6:] for p in every}
    messages = identical = grib_bytes = 0
    reasons = []
    if not every:
        reasons.append(f"no ICMGG/ICMSH output files in {run_dir}")
    # a run with no grid-point fields (an idealised case without physics) writes no ICMGG
    if files["GG"] and {p.name[-6:] for p in files["GG"]} != {p.name[-6:] for p in files["SH"]}:
        reasons.append("grid-point and spectral files cover different steps")
    with tempfile.TemporaryDirectory() as tmp:
        for path in every:
            extracted = os.path.join(tmp, path.name + ".fdb")
            read = subprocess.run(["fdb-read", "--extract", str(path), extracted],
                                  capture_output=True, text=True)
            if read.returncode != 0 or not os.path.exists(extracted):
                reasons.append(f"{path.name}: fdb-read failed ({read.returncode})")
                say(f"file={path.name} RESULT=ERROR fdb-read rc={read.returncode}")
                continue
            buffer = io.StringIO()
            same = gribcompare.compare(str(path), extracted, out=buffer)
            counts = _COUNTS.search(buffer.getvalue())
            in_file = gribcompare.read(str(path))
            n_ref = len(in_file)
            messages += n_ref
            identical += int(counts.group(4)) if counts else 0
            # the messages' own bytes: the IFS's CIO pads each message in a file to whole
            # 4-byte words (1390 -> 1392), which FDB, holding the message, does not
            grib_bytes += sum(m.length for m in in_file)
            say(f"file={path.name} messages={n_ref} "
                f"identical={counts.group(4) if counts else 0} "
                f"RESULT={'IDENTICAL' if same else 'DIFFERENT'}")
            if not same:
                reasons.append(f"{path.name} differs")
                for line in buffer.getvalue().splitlines():
                    if "DIFFERENT" in line:
                        say(f"  {line.removeprefix('gribcompare: ')}")
    fdb_fields = fdb_field_count() if every else 0
    fdb_bytes = fdb_data_bytes(fdb_root)
    if fdb_fields != messages:
        reasons.append(f"FDB lists {fdb_fields} fields, the GRIB files hold {messages}")
    if fdb_bytes != grib_bytes:
        reasons.append(f"FDB data files hold {fdb_bytes} bytes, the GRIB files {grib_bytes}")
    say(f"files={len(every)} steps={len(steps)} messages={messages} identical={identical} "
        f"fdb_fields={fdb_fields} bytes_grib={grib_bytes} bytes_fdb={fdb_bytes} "
        + ("RESULT=IDENTICAL" if not reasons else "RESULT=DIFFERENT reason=" + "; ".join(reasons)))
    return not reasons


# Run logs

SECONDS_PER_DAY = 86400.0

_STAT_LINE = re.compile(
    r"^\s*(?P<clock>\d\d:\d\d:\d\d)\s+(?P<conf>\S{9})\s+(?P<caller>\S+)\s+(?P<step>-?\d+)\s+"
    r"(?P<vcpu>\d+\.\d+)\s+(?P<cpu>\d+\.\d+)\s+(?P<wall>\d+\.\d+)\s+"
    r"(?P<cpu_min>\d+):(?P<cpu_sec>\d\d)\s+(?P<wall_min>\d+):(?P<wall_sec>\d\d)"
)
_NODE_STEP = re.compile(
    r"^\s*\d\d:\d\d:\d\d\s+(?P<label>[A-Z]\w*)\s+(?P<step>\d+)\s+H=\s*(?P<hours>\d+):(?P<minutes>\d\d)"
    r"\s+\+CPU=\s*(?P<seconds>\d+\.\d+)"
)


@dataclass(frozen=True)
class StatLine:
    clock: str
    config: str
    caller: str                 # STEPO for a model step
    step: int
    cpu_seconds: float          # of this step
    wall_seconds: float         # of this step
    total_cpu_seconds: int      # since the start, whole seconds
    total_wall_seconds: int


@dataclass(frozen=True)
class NodeStep:
    step: int
    forecast_seconds: int       # model time reached
    seconds: float              # +CPU=, the step's elapsed time


@dataclass(frozen=True)
class OpenIFSRun:
    forecast_seconds: float
    wall_seconds: float
    steps: int

    @property
    def forecast_days(self) -> float:
        return self.forecast_seconds / SECONDS_PER_DAY

    @property
    def forecast_days_per_day(self) -> float:
        return forecast_days_per_day(self.forecast_days, self.wall_seconds)


def forecast_days_per_day(forecast_days: float, wall_seconds: float) -> float:
    if wall_seconds <= 0:
        raise ValueError("wall time must be positive")
    return forecast_days * SECONDS_PER_DAY / wall_seconds


def parse_ifs_stat(text: str) -> list[StatLine]:
    lines = []
    for raw in text.splitlines():
        if m := _STAT_LINE.match(raw):
            lines.append(StatLine(
                m["clock"], m["conf"], m["caller"], int(m["step"]),
                float(m["cpu"]), float(m["wall"]),
                int(m["cpu_min"]) * 60 + int(m["cpu_sec"]),
                int(m["wall_min"]) * 60 + int(m["wall_sec"]),
            ))
    return lines


def parse_node_steps(text: str) -> list[NodeStep]:
    steps = []
    for raw in text.splitlines():
        if m := _NODE_STEP.match(raw):
            steps.append(NodeStep(int(m["step"]), int(m["hours"]) * 3600 + int(m["minutes"]) * 60,
                                  float(m["seconds"])))
    return steps


def summarize(ifs_stat: str, node: str | None = None, forecast_hours: float | None = None,
              timestep_seconds: float | None = None) -> OpenIFSRun:
    """Forecast length and model wall time of a run.

    Wall time is the model's own accumulated real time on the last ifs.stat line (whole
    seconds, setup included). Forecast length comes from, in order: forecast_hours; the last
    H= of NODE.001_01; the last step in ifs.stat times timestep_seconds.
    """
    stat = parse_ifs_stat(ifs_stat)
    if not stat:
        raise ValueError("no ifs.stat lines found")
    wall = max(line.total_wall_seconds for line in stat)
    last_step = max(line.step for line in stat)
    if forecast_hours is not None:
        forecast = forecast_hours * 3600.0
    elif node is not None and (steps := parse_node_steps(node)):
        forecast = float(steps[-1].forecast_seconds)
    elif timestep_seconds is not None:
        forecast = last_step * timestep_seconds
    else:
        raise ValueError("forecast length unknown: give NODE.001_01, forecast_hours or timestep_seconds")
    return OpenIFSRun(forecast_seconds=forecast, wall_seconds=float(wall), steps=last_step)


def forecast_days_per_day_of_run(ifs_stat: str, node: str) -> float:
    """Forecast days per wall-clock day of a run, from its ifs.stat and NODE.001_01."""
    return summarize(ifs_stat, node).forecast_days_per_day


def forecast_seconds_of_run(ifs_stat: str, node: str) -> float:
    return summarize(ifs_stat, node).forecast_seconds


def _assignment(text: str):
    m = re.fullmatch(r"(?P<group>\w+):(?P<key>\w+(?:\(\d+\))?)=(?P<value>.*)", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r}: expected GROUP:KEY=VALUE")
    return m["group"], m["key"], m["value"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m iostack_rfm.jobs.openifs",
                                 description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    n = sub.add_parser("namelist", help="set namelist variables in place")
    n.add_argument("file", type=pathlib.Path)
    n.add_argument("--set", dest="assignments", type=_assignment, action="append", default=[],
                   metavar="GROUP:KEY=VALUE")
    c = sub.add_parser("compare-fdb", help="GRIB run output against the FDB run's archive")
    c.add_argument("run_dir", type=pathlib.Path)
    c.add_argument("--fdb-root", required=True, type=pathlib.Path)
    args = ap.parse_args(argv)
    if args.cmd == "namelist":
        text = args.file.read_text()
        for group, key, value in args.assignments:
            text = set_namelist(text, group, key, value)
            print(f"oifs-namelist: &{group.upper()} {key.upper()}={fortran_value(value)}")
        args.file.write_text(text)
        return 0
    try:
        return 0 if compare_with_fdb(args.run_dir, args.fdb_root) else 1
    except (gribcompare.GribError, OSError, subprocess.CalledProcessError) as e:
        print(f"oifs-output: RESULT=ERROR {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
