"""OpenFOAM solver logs (simpleFoam and friends, openfoam.com v1912 to v2312 and
openfoam.org): iterations, timing, convergence and the residuals of the last iteration.

A SIMPLE iteration in the log:

    Time = 42

    smoothSolver:  Solving for Ux, Initial residual = 0.0012, Final residual = 8.1e-05, No Iterations 3
    GAMG:  Solving for p, Initial residual = 0.0089, Final residual = 7.6e-05, No Iterations 11
    time step continuity errors : sum local = 1.2e-05, global = 3.4e-07, cumulative = 0.0021
    ExecutionTime = 61.27 s  ClockTime = 63 s

and, if the residual controls are met, "SIMPLE solution converged in 42 iterations".
openfoam.org prints "Time = 42s"; both are read.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

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
