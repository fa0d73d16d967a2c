"""OpenFOAM ([OCI-OpenFOAM]): the shell lines that set up and run a case, its solver logs, and the
job-side summary of what a run wrote. Standard library only.

Solver logs (simpleFoam and friends, openfoam.com v1912 to v2312 and openfoam.org):
iterations, timing, convergence and the residuals of the last iteration. A SIMPLE
iteration in the log:

    Time = 42

    smoothSolver:  Solving for Ux, Initial residual = 0.0012, Final residual = 8.1e-05, No Iterations 3
    GAMG:  Solving for p, Initial residual = 0.0089, Final residual = 7.6e-05, No Iterations 11
    time step continuity errors : sum local = 1.2e-05, global = 3.4e-07, cumulative = 0.0021
    ExecutionTime = 61.27 s  ClockTime = 63 s

and, if the residual controls are met, "SIMPLE solution converged in 42 iterations".
openfoam.org prints "Time = 42s"; both are read.

What a run left in its case directory, in the job:

    python3 -m iostack_rfm.jobs.openfoam summary CASE [--label NAME] [--top]

prints one line

    foamcase: label=serial processors=0 times=282 written=1 files=7 cells=12225 sha256=<hex>

`times` is the latest written time (0 excluded), `written` how many time directories were
written after 0 (in each processor directory when the case is decomposed: they must agree),
`files` and `sha256` cover every file under the written time directories (relative path and
content, in sorted order), so two runs wrote bit-identical output exactly when their digests
are equal. `cells` is the length of the internalField of the latest time's pressure field
(summed over processors).
"""
from __future__ import annotations

import argparse
import hashlib
import pathlib
import re
import sys
from dataclasses import dataclass, field


# Case set-up and runs: shell lines of a job

def foam_set(dictionary, entry, value):
    """Shell: set one entry of a case dictionary (the file is rewritten by OpenFOAM itself)."""
    return f'foamDictionary -entry {entry} -set "{value}" {dictionary} > /dev/null'


def foam_remove(dictionary, entry):
    return f'foamDictionary -entry {entry} -remove {dictionary} > /dev/null'


def tutorial_case(tutorial, case, end_time):
    """Shell: copy a tutorial to `case`, without its function objects, to run to `end_time`
    and write only then (OpenFOAM writes the converged state when it stops early)."""
    control = f'{case}/system/controlDict'
    return ' && '.join([f'cp -r "$FOAM_TUTORIALS/{tutorial}" {case}',
                        foam_remove(control, 'functions'),
                        foam_set(control, 'endTime', end_time),
                        foam_set(control, 'writeInterval', end_time)])


def decompose_par_dict(path, subdomains):
    """Shell: write a decomposeParDict for `subdomains` ranks (cases that have none): slabs
    along x, the `simple` method every OpenFOAM build has (Debian's lacks scotch)."""
    return (f"printf 'FoamFile\\n{{\\n    version 2.0;\\n    format ascii;\\n"
            f"    class dictionary;\\n    object decomposeParDict;\\n}}\\n"
            f"numberOfSubdomains {subdomains};\\nmethod simple;\\n"
            f"simpleCoeffs\\n{{\\n    n ({subdomains} 1 1);\\n    delta 0.001;\\n}}\\n' > {path}")


def in_case(case, application, *args, mpi_command=None):
    """Shell: run an application in the case directory, its output in log.<application>;
    with the check's `mpi_command`, on the case's decomposition (-parallel)."""
    words = [application, *args] if mpi_command is None else [
        mpi_command, application, '-parallel', *args]
    return f'(cd {case} && {" ".join(words)} > log.{application} 2>&1)'


def summary_command(case, label, top=False):
    return (f'python3 -m iostack_rfm.jobs.openfoam summary {case} --label {label}'
            + (' --top' if top else ''))


# Solver logs

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_TIME = re.compile(rf"^Time = (?P<time>{_NUMBER})s?\s*$")
_SOLVE = re.compile(
    rf"^(?P<solver>\w+):\s+Solving for (?P<field>\w+), Initial residual = (?P<initial>{_NUMBER}), "
    rf"Final residual = (?P<final>{_NUMBER}), No Iterations (?P<iterations>\d+)"
)
_TIMING = re.compile(rf"^ExecutionTime = (?P<execution>{_NUMBER}) s\s+ClockTime = (?P<clock>{_NUMBER}) s")
_CONVERGED = re.compile(r"^(?P<algorithm>SIMPLE|PIMPLE|PISO)\w* solution converged in (?P<iterations>\d+) iterations")


@dataclass(frozen=True)
class Residual:
    initial: float          # of the field's first solve in the iteration, what residualControl tests
    final: float            # after its last solve
    solver_iterations: int  # linear-solver iterations, all solves summed


@dataclass
class SolverLog:
    iterations: int = 0                        # "Time =" blocks seen
    last_time: float | None = None
    execution_seconds: float | None = None     # last ExecutionTime (CPU)
    clock_seconds: float | None = None         # last ClockTime (wall)
    converged_at: int | None = None            # "... converged in N iterations"
    finished: bool = False                     # the log ends with "End"
    residuals: dict[str, Residual] = field(default_factory=dict)   # of the last iteration


def parse(text: str) -> SolverLog:
    log = SolverLog()
    current: dict[str, Residual] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if m := _TIME.match(line):
            if current:
                log.residuals = current
            current = {}
            log.iterations += 1
            log.last_time = float(m["time"])
        elif m := _SOLVE.match(line):
            name = m["field"]
            seen = current.get(name)
            iterations = int(m["iterations"])
            current[name] = Residual(
                initial=seen.initial if seen else float(m["initial"]),
                final=float(m["final"]),
                solver_iterations=(seen.solver_iterations if seen else 0) + iterations,
            )
        elif m := _TIMING.match(line):
            log.execution_seconds = float(m["execution"])
            log.clock_seconds = float(m["clock"])
        elif m := _CONVERGED.match(line):
            log.converged_at = int(m["iterations"])
        elif line == "End":
            log.finished = True
    if current:
        log.residuals = current
    return log


def converged_at(text: str) -> int:
    """The SIMPLE iteration the residual controls were met at (fails if they never were)."""
    log = parse(text)
    if log.converged_at is None:
        raise ValueError('no "solution converged in N iterations" line')
    return log.converged_at


def clock_seconds(text: str) -> float:
    log = parse(text)
    if log.clock_seconds is None:
        raise ValueError('no ClockTime')
    return log.clock_seconds


def iterations(text: str) -> int:
    return parse(text).iterations


def finished(text: str) -> bool:
    """The log ends with OpenFOAM's "End"."""
    return parse(text).finished


def residuals_above(text: str, limits: dict) -> list[str]:
    """Fields whose last initial residual is not below its residualControl limit
    ({field regex: limit}); [] when the run converged as the case asked."""
    log = parse(text)
    above = []
    for pattern, limit in limits.items():
        matched = [f for f in log.residuals if re.fullmatch(pattern, f)]
        if not matched:
            above.append(f'{pattern}: not solved')
        above += [f'{f}={log.residuals[f].initial:g}>={limit:g}' for f in matched
                  if log.residuals[f].initial >= limit]
    return above


# What a run wrote (the job-side summary)

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
    cells: int | None = 0
    for times in per_root:
        target = times[-1] / field if times else None
        n = field_cells(target) if target and target.is_file() else None
        if n is None:
            cells = None
            break
        cells = (cells or 0) + n
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


def summary_value(text: str, label: str, key: str, conv=str):
    """`key` of the `foamcase:` line labelled `label` in a job's output."""
    summaries = {s["label"]: s for s in (parse_line(line) for line in text.splitlines()
                                         if line.startswith("foamcase:"))}
    if label not in summaries:
        raise ValueError(f"no foamcase summary of {label}")
    return conv(summaries[label][key])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m iostack_rfm.jobs.openfoam",
                                 description=__doc__.splitlines()[0])
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
