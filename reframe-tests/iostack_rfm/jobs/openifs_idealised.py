"""OpenIFS idealised forecasts (issue 32): the job-side half of OpenifsIdealisedCheck
(checks/openifs_idealised.py). Standard library only.

    python3 -m iostack_rfm.jobs.openifs_idealised fort4 CASE MODE --nproc N --groups FILE --out fort.4
    python3 -m iostack_rfm.jobs.openifs_idealised record RUN_DIR --mode M --rep R --start T0 --end T1
    python3 -m iostack_rfm.jobs.openifs_idealised figures RUNS_FILE [--norms-of DIR ...] [--same-output DIR ...]

The model starts from an analytic state (N3DINI=2) with its geometry from the namelist
(NSUPERSEDE=0), so it reads no ECMWF data. The project's namelists are
reframe-tests/src/openifs_idealised/<case>.nml (one per case, a comment per group). `fort4`
makes a run's namelist from one: the output mode's switches and the job's NPROC set with
iostack_rfm.jobs.openifs.set_namelist, then ifs-test's list of empty groups
(share/ifs_test/namelist) appended, as ifs-test's ifs-run does: POSNAM aborts on a group
that is missing, and the model reads the first of each name.

The output modes, the same forecast each time:
- none: no history and no post-processing event (NAMCT1 N1HIS=0, N1POS=0; monio_t.F90
  marks no step), so nothing is encoded or written: the model's own speed;
- grib: GRIB files ICMSH/ICMGG/ICMUA<exp>+<step> in the run directory (LFDBOP false);
- fdb: the same GRIB messages to MultIO (LFDBOP true: fdbsubs_mod.F90 IMULTIO_WRITE and
  IMULTIO_FLUSH), whose sink is FDB (MULTIO_CONFIG_FILE, FDB5_CONFIG_FILE).

`record` reads one finished run: its wall time (the job's clock around the model's launch:
setup and the last flush included, which ifs.stat's whole seconds would round), whether the
model ended normally (NODE.001_01's ` *** END CNT0 *** `), the forecast reached (the last
H= of NODE.001_01) and the spectral norms it printed (SPECTRAL NORMS blocks, one per step
with NFRSDI=1). It appends one line to the runs file and prints it:

    oifs-run: mode=grib rep=1 wall=41.183 forecast_hours=24 steps=48 norms=49 end=yes days_per_day=2097.9

`figures` prints, per mode, the median wall time and days per day of its runs with their
spread ((max - min) / median), FDB's and the GRIB files' share of the forecast's time (the
difference of the medians from the no-output runs', over the output run's: seed 000's
"FDB cost"), whether every run's norms are identical (`--norms-of`: each run's NORMS file,
ifs-test's ifs-grep-norms.pl output) and whether runs wrote identical output files
(`--same-output`: file names and bytes):

    oifs-idealised: mode=fdb runs=3 wall_median=43.120 wall_spread=0.021 days_per_day=2003.7 days_per_day_spread=0.021
    oifs-idealised: share fdb=0.0449 grib=0.0302
    oifs-idealised: norms runs=9 RESULT=IDENTICAL
    oifs-idealised: output runs=3 files=72 RESULT=IDENTICAL
"""
from __future__ import annotations

import argparse
import filecmp
import pathlib
import re
import statistics
import sys
from dataclasses import dataclass

from iostack_rfm.jobs import openifs

#: the project's namelists (reframe-tests/src/openifs_idealised)
NAMELISTS = pathlib.Path(__file__).resolve().parents[2] / "src" / "openifs_idealised"


@dataclass(frozen=True)
class Case:
    """An idealised case: its namelist and what the check expects of it."""

    name: str
    #: spectral truncation and levels, as the namelist sets them
    truncation: int
    levels: int
    #: the smoke case: seconds, for CI and the deploy's quick look
    smoke: bool = False
    #: most MPI ranks the check gives it (None: one per core): T21's 32 latitudes and 22
    #: zonal wavenumbers leave nothing to share among a node's worth of ranks
    max_tasks: int | None = None
    #: its initial state depends on the MPI rank count: Held-Suarez's initial noise
    #: (NOISEVOR, sumisc_spec.F90) restarts its random sequence on each task's points
    noise_per_task: bool = False

    @property
    def namelist(self) -> pathlib.Path:
        return NAMELISTS / f"{self.name}.nml"


CASES = {
    "hs_t21l19": Case("hs_t21l19", 21, 19, smoke=True, max_tasks=2, noise_per_task=True),
    "hs_tl159l31": Case("hs_tl159l31", 159, 31, noise_per_task=True),
    "dcmip161_tl159l31": Case("dcmip161_tl159l31", 159, 31),
}


def norms_key(case: str, tasks: int, threads: int, mode: str, reference_blas: bool) -> str:
    """The name a run's norms are kept under for the releases after it. With the stack's
    BLAS (OpenBLAS) the norms depend on the layout and the output mode: its SGEMM rounds a
    field differently with the number of fields the Legendre transforms take at once (more
    at a post-processing step; fewer on each of more tasks). With a reference BLAS, which
    sums each column of a product in one order whatever its width, they depend on neither,
    only on the task count where the case draws its initial noise per task: one key then
    holds every layout and mode to the same norms."""
    if not reference_blas:
        return f"idealised-{case}-{tasks}x{threads}-{mode}"
    per_task = f"-tasks{tasks}" if CASES[case].noise_per_task else ""
    return f"idealised-{case}{per_task}-reference-blas"


#: the namelist switches of each output mode (GROUP, KEY, value); see the docstring
OUTPUT_MODES = {
    "none": (("NAMCT0", "LFDBOP", False), ("NAMCT1", "N1HIS", 0), ("NAMCT1", "N1POS", 0)),
    "grib": (("NAMCT0", "LFDBOP", False), ("NAMCT1", "N1HIS", 1), ("NAMCT1", "N1POS", 1)),
    "fdb": (("NAMCT0", "LFDBOP", True), ("NAMCT1", "N1HIS", 1), ("NAMCT1", "N1POS", 1)),
}


# Namelists: the standard library reads what the model reads, for the checks and the tests

_GROUP = re.compile(r"^[ \t]*&(\w+)[ \t]*$(.*?)^[ \t]*/[ \t]*$", re.M | re.S)
_KEY = re.compile(r"(?:^|,|\s)([A-Za-z]\w*(?:\([\d,: ]*\))?(?:%\w+)?)\s*=", re.M)


def _strip_comment(line: str) -> str:
    """The line without its `!` comment (a `!` inside quotes is text)."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "!":
            return line[:i]
    return line


def _values(text: str) -> list:
    items, quote, current = [], None, ""
    for c in text:
        if quote:
            current += c
            if c == quote:
                quote = None
        elif c in "'\"":
            quote, current = c, current + c
        elif c == ",":
            items.append(current.strip())
            current = ""
        else:
            current += c
    items.append(current.strip())
    return [_value(v) for v in items if v]


def _value(text: str):
    low = text.lower()
    if low in (".true.", ".t.", "t", "true"):
        return True
    if low in (".false.", ".f.", "f", "false"):
        return False
    if text[0] in "'\"" and text[-1] == text[0]:
        return text[1:-1]
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(low.replace("d", "e"))
    except ValueError:
        raise ValueError(f"namelist value {text!r} is neither logical, number nor quoted "
                         "text") from None


def parse_namelist(text: str) -> list[tuple[str, dict[str, object]]]:
    """The groups of a namelist file in order, each {KEY: value or [values]} (keys upper
    case). Comment lines and `!` comments are dropped; a value list stays a list."""
    clean = "\n".join(_strip_comment(line).rstrip() for line in text.splitlines()) + "\n"
    groups = []
    for m in _GROUP.finditer(clean):
        body = m.group(2)
        keys = list(_KEY.finditer(body))
        assignments: dict[str, object] = {}
        for i, k in enumerate(keys):
            nxt = keys[i + 1] if i + 1 < len(keys) else None
            raw = body[k.end():nxt.start(1) if nxt else len(body)]
            values = _values(raw.strip().rstrip(","))
            if not values:
                raise ValueError(f"&{m.group(1)} {k.group(1)}: no value")
            name = k.group(1).upper().replace(" ", "")
            if name in assignments:
                raise ValueError(f"&{m.group(1)} sets {name} twice")
            assignments[name] = values[0] if len(values) == 1 else values
        groups.append((m.group(1), assignments))
    outside = _GROUP.sub("", clean).strip()
    if outside:
        raise ValueError(f"text outside any group: {outside.splitlines()[0]!r}")
    return groups


def namelist_groups(text: str) -> dict[str, dict[str, object]]:
    """parse_namelist as {GROUP: assignments}; a group twice is refused (the model would
    read only the first)."""
    found: dict[str, dict[str, object]] = {}
    for group, assignments in parse_namelist(text):
        if group in found:
            raise ValueError(f"group &{group} appears twice")
        found[group] = assignments
    return found


def forecast_hours(groups: dict[str, dict[str, object]]) -> float:
    """The forecast length NAMRIP CSTOP says (surip.F90: t<steps>, h<hours>, d<days>)."""
    rip = groups["NAMRIP"]
    stop, tstep = str(rip["CSTOP"]), float(str(rip["TSTEP"]))
    unit, n = stop[0], float(stop[1:])
    if unit == "t":
        return n * tstep / 3600.0
    return {"h": n, "d": 24.0 * n}[unit]


def output_hours(groups: dict[str, dict[str, object]]) -> tuple[float, float]:
    """Hours between history (model-level) and post-processing (pressure-level) events."""
    tstep = float(str(groups["NAMRIP"]["TSTEP"]))
    ct0 = groups["NAMCT0"]
    return (int(str(ct0["NFRHIS"])) * tstep / 3600.0,
            int(str(ct0["NFRPOS"])) * tstep / 3600.0)


def fort4(case: str, mode: str, nproc: int, empty_groups: str,
          sets: tuple[tuple[str, str, str], ...] = ()) -> str:
    """A run's namelist: the case's, the mode's switches, NPROC and `sets`, then the empty
    groups of every namelist the model may read."""
    text = CASES[case].namelist.read_text()
    for group, key, value in (*OUTPUT_MODES[mode], ("NAMPAR0", "NPROC", nproc), *sets):
        text = openifs.set_namelist(text, group, key, value)
    namelist_groups(text)       # a group twice, or a line the model cannot read: refused here
    return text.rstrip("\n") + "\n" + empty_groups


# One run

_NODE_END = re.compile(r"^\s*\*\*\* END CNT0 \*\*\*\s*$", re.M)
_SPNORMS = re.compile(r"^\s*SPECTRAL NORMS\s", re.M)
#: the time loop starts here: the set-up prints its own norms before it (two in 48r1.1.0)
_CNT4 = re.compile(r"^\s*START CNT4\b", re.M)


@dataclass(frozen=True)
class Run:
    mode: str
    rep: int
    wall: float
    forecast_hours: float
    steps: int
    norms: int
    ended: bool

    @property
    def days_per_day(self) -> float:
        return openifs.forecast_days_per_day(self.forecast_hours / 24.0, self.wall)

    def line(self) -> str:
        return (f"oifs-run: mode={self.mode} rep={self.rep} wall={self.wall:.3f} "
                f"forecast_hours={self.forecast_hours:g} steps={self.steps} norms={self.norms} "
                f"end={'yes' if self.ended else 'no'} days_per_day={self.days_per_day:.1f}")


_RUN_LINE = re.compile(r"^oifs-run: mode=(\w+) rep=(\d+) wall=([\d.]+) forecast_hours=([\d.]+) "
                       r"steps=(\d+) norms=(\d+) end=(yes|no)", re.M)


def read_run(node: str, mode: str, rep: int, wall: float) -> Run:
    """A run from its NODE.001_01 and the wall time the job measured."""
    steps = openifs.parse_node_steps(node)
    if not steps:
        raise ValueError("NODE.001_01 has no model step (no `STEP n H=` line)")
    loop = _CNT4.search(node)
    return Run(mode, rep, wall, steps[-1].forecast_seconds / 3600.0, steps[-1].step,
               len(_SPNORMS.findall(node, loop.end() if loop else 0)),
               bool(_NODE_END.search(node)))


def read_runs(text: str) -> list[Run]:
    return [Run(m[1], int(m[2]), float(m[3]), float(m[4]), int(m[5]), int(m[6]), m[7] == "yes")
            for m in _RUN_LINE.finditer(text)]


# Figures of a job's runs

def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


def figures(runs: list[Run]) -> list[str]:
    lines = []
    walls: dict[str, float] = {}
    for mode in OUTPUT_MODES:
        mine = [r for r in runs if r.mode == mode]
        if not mine:
            continue
        wall = [r.wall for r in mine]
        dpd = [r.days_per_day for r in mine]
        walls[mode] = statistics.median(wall)
        lines.append(f"mode={mode} runs={len(mine)} wall_median={walls[mode]:.3f} "
                     f"wall_spread={spread(wall):.3f} days_per_day={statistics.median(dpd):.1f} "
                     f"days_per_day_spread={spread(dpd):.3f}")
    if "none" in walls and len(walls) > 1:
        # the output's cost: the time the forecast took beyond the no-output run's, as a
        # share of the forecast with output
        shares = {m: (w - walls["none"]) / w for m, w in walls.items() if m != "none"}
        lines.append("share " + " ".join(f"{m}={s:.4f}" for m, s in shares.items()))
    return lines


def model_norms(text: str) -> str:
    """The model's own norms of a NORMS file: without the FULL-POS SPNORMS lines that
    ifs-grep-norms.pl keeps for each post-processing event, which a run with no output
    (N1POS=0) does not have; output must not change the model's norms."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if not line.startswith("FULL-POS"))


def same_norms(dirs: list[pathlib.Path]) -> tuple[bool, str]:
    texts = [model_norms((d / "NORMS").read_text()) if (d / "NORMS").is_file() else ""
             for d in dirs]
    if not texts or any(not t.strip() for t in texts):
        empty = [str(d) for d, t in zip(dirs, texts, strict=True) if not t.strip()]
        return False, f"no norms in {', '.join(empty) or 'any run'}"
    differing = [str(d) for d, t in zip(dirs, texts, strict=True) if t != texts[0]]
    if differing:
        first = _first_difference(texts[0], texts[dirs.index(pathlib.Path(differing[0]))])
        return False, f"{', '.join(differing)} differ from {dirs[0]}: {first}"
    return True, ""


def _first_difference(a: str, b: str) -> str:
    """Where two runs' norms (ifs-grep-norms.pl's NORMS) first differ: the SPECTRAL NORMS
    block, the model step it belongs to and the field, where a change first shows. The
    set-up's blocks carry no grid-point norms, the time loop's each do: a block is step
    (its number - the set-up's blocks - 1)."""
    lines_a, lines_b = a.splitlines(), b.splitlines()
    # the first block followed by grid-point norms is step 0
    setup, block, seen = None, 0, False
    for line in lines_a:
        if _SPNORMS.match(line):
            if seen:
                break
            block += 1
        elif line.lstrip().startswith("GPNORM") and block:
            seen = True
    if seen:
        setup = block - 1
    block, header = 0, []
    for x, y in zip(lines_a, lines_b, strict=False):
        if _SPNORMS.match(x):
            block += 1
        words = x.split()
        if words[:1] in (["LEV"], ["GPNORM"]):
            # a table's column names, two or more spaces apart
            header = re.split(r"\s{2,}", x.strip())
        if x == y:
            continue
        where = f"norms block {block}"
        if setup is not None:
            step = block - setup - 1
            where += " (set-up)" if step < 0 else f" (step {step})"
        field = _field_of(x, y, header)
        return f"{where}{field}: {x.strip()!r} != {y.strip()!r}"
    return "one has more norms lines"


def _field_of(x: str, y: str, header: list[str]) -> str:
    """`, field NAME` for the first value that differs between two norms lines: the name is
    the table's column (after the row label) or, on a SPECTRAL NORMS line, the label before
    the value."""
    wx, wy = x.split(), y.split()
    for i, (u, v) in enumerate(zip(wx, wy, strict=False)):
        if u == v:
            continue
        if _SPNORMS.match(x):
            names = re.findall(r"([A-Z][A-Z()]+)\s+[-+.\dE]+", x)
            values = re.findall(r"[A-Z][A-Z()]+\s+([-+.\dE]+)", x)
            if u in values and len(names) == len(values):
                return f", field {names[values.index(u)]}"
            return ""
        if header[:1] == ["GPNORM"] and 1 <= i < len(header) - 1:
            return f", field {header[1]} {header[i + 1]} (row {wx[0]})"
        if header and 1 <= i < len(header):
            return f", field {header[i]} (row {wx[0]})"
        return ""
    return ""


def same_output(dirs: list[pathlib.Path]) -> tuple[bool, int, str]:
    """Whether the runs wrote the same output files, byte for byte."""
    names = [sorted(p.name for p in d.iterdir() if openifs.OUTPUT_FILE.match(p.name)) for d in dirs]
    if not names or not names[0]:
        return False, 0, f"no output files in {dirs[0] if dirs else '(no run)'}"
    for d, n in zip(dirs[1:], names[1:], strict=True):
        if n != names[0]:
            return False, len(names[0]), f"{d} wrote other files than {dirs[0]}"
        for name in n:
            if not filecmp.cmp(dirs[0] / name, d / name, shallow=False):
                return False, len(n), f"{d / name} differs from {dirs[0] / name}"
    return True, len(names[0]), ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m iostack_rfm.jobs.openifs_idealised",
                                 description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fort4", help="a run's namelist")
    f.add_argument("case", choices=sorted(CASES))
    f.add_argument("mode", choices=list(OUTPUT_MODES))
    f.add_argument("--nproc", type=int, required=True)
    f.add_argument("--groups", type=pathlib.Path, required=True,
                   help="ifs-test's share/ifs_test/namelist (every group, empty)")
    f.add_argument("--set", dest="sets", action="append", default=[],
                   type=openifs._assignment, metavar="GROUP:KEY=VALUE")
    f.add_argument("--out", type=pathlib.Path, required=True)
    r = sub.add_parser("record", help="one finished run")
    r.add_argument("run_dir", type=pathlib.Path)
    r.add_argument("--mode", required=True, choices=list(OUTPUT_MODES))
    r.add_argument("--rep", type=int, required=True)
    r.add_argument("--start", type=float, required=True)
    r.add_argument("--end", type=float, required=True)
    r.add_argument("--runs", type=pathlib.Path, required=True, help="the file runs are added to")
    g = sub.add_parser("figures", help="medians, spreads, shares and identities of the runs")
    g.add_argument("runs", type=pathlib.Path)
    g.add_argument("--norms-of", nargs="*", type=pathlib.Path, default=[])
    g.add_argument("--by-mode", action="store_true",
                   help="--norms-of: each mode's runs (MODE-REP directories) compared among "
                        "themselves, the modes with each other said only")
    g.add_argument("--same-across-modes", action="store_true",
                   help="--by-mode: the modes must print the same norms too (a reference BLAS)")
    g.add_argument("--same-output", nargs="*", type=pathlib.Path, default=[])
    args = ap.parse_args(argv)
    try:
        if args.cmd == "fort4":
            args.out.write_text(fort4(args.case, args.mode, args.nproc, args.groups.read_text(),
                                      args.sets))
            print(f"oifs-idealised: {args.out} case={args.case} mode={args.mode} "
                  f"nproc={args.nproc}")
            return 0
        if args.cmd == "record":
            node = (args.run_dir / "NODE.001_01").read_text(errors="replace")
            run = read_run(node, args.mode, args.rep, args.end - args.start)
            with open(args.runs, "a") as out:
                out.write(run.line() + "\n")
            print(run.line())
            return 0 if run.ended else 1
        ok = True
        for line in figures(read_runs(args.runs.read_text())):
            print(f"oifs-idealised: {line}")
        if args.norms_of and args.by_mode:
            # reruns of a mode must print the same norms; between modes it is said, and
            # required only with a reference BLAS (norms_key: with OpenBLAS a
            # post-processing step changes the model's norms from the next step)
            modes: dict[str, list[pathlib.Path]] = {}
            for d in args.norms_of:
                modes.setdefault(d.name.split("-")[0], []).append(d)
            for mode, dirs in modes.items():
                same, why = same_norms(dirs)
                ok &= same
                print(f"oifs-idealised: norms mode={mode} runs={len(dirs)} RESULT="
                      + ("IDENTICAL" if same else f"DIFFERENT {why}"))
            if len(modes) > 1:
                same, why = same_norms([dirs[0] for dirs in modes.values()])
                if args.same_across_modes:
                    ok &= same
                print(f"oifs-idealised: norms across-modes {' '.join(modes)} RESULT="
                      + ("IDENTICAL" if same else f"DIFFERENT {why}"))
        elif args.norms_of:
            same, why = same_norms(args.norms_of)
            ok &= same
            print(f"oifs-idealised: norms runs={len(args.norms_of)} RESULT="
                  + ("IDENTICAL" if same else f"DIFFERENT {why}"))
        if args.same_output:
            same, files, why = same_output(args.same_output)
            ok &= same
            print(f"oifs-idealised: output runs={len(args.same_output)} files={files} RESULT="
                  + ("IDENTICAL" if same else f"DIFFERENT {why}"))
        return 0 if ok else 1
    except (ValueError, KeyError, OSError) as e:
        print(f"oifs-idealised: ERROR {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
