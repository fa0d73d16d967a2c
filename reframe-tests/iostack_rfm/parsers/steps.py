"""Named, timed steps of a job script: the run pattern of the application checks.

A check's job runs several programs (copy a case, decompose it, run a solver twice, hash
the output, ...). Each is written as a step,

    iostack-step: name=solve-serial rc=0 start=1717171717.123456789 end=1717171724.987654321

so the sanity function can require every step's exit status to be 0 (a failed step does not
stop the script, its rc says it failed) and the performance functions can read each step's
wall time from the job's own clock at nanosecond resolution. Standard library only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "iostack-step:"
_LINE = re.compile(rf"^{PREFIX} name=(?P<name>\S+) rc=(?P<rc>-?\d+) "
                   r"start=(?P<start>\d+(?:\.\d+)?) end=(?P<end>\d+(?:\.\d+)?)\s*$", re.M)
_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*$")


@dataclass(frozen=True)
class Step:
    name: str
    rc: int
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


def timed(name: str, command: str) -> str:
    """One shell line running `command` (in the current shell, so `cd` and exports stay)
    and reporting it as step `name`."""
    if not _NAME.match(name):
        raise ValueError(f"step name {name!r}: letters, digits, '.', '_' and '-' only")
    return (f"_t0=$(date +%s.%N); {{ {command}; }}; _rc=$?; _t1=$(date +%s.%N); "
            f'echo "{PREFIX} name={name} rc=$_rc start=$_t0 end=$_t1"')


def parse(text: str) -> dict[str, Step]:
    """The steps in a job's output, by name (a repeated name keeps its last run)."""
    return {m["name"]: Step(m["name"], int(m["rc"]), float(m["start"]), float(m["end"]))
            for m in _LINE.finditer(text)}


def failed(text: str, expected=()) -> list[str]:
    """Why the steps are not all fine: non-zero exit statuses and expected steps missing."""
    found = parse(text)
    problems = [f"step {s.name} exited with {s.rc}" for s in found.values() if s.rc != 0]
    problems += [f"step {name} did not run" for name in expected if name not in found]
    return problems


def seconds(text: str, name: str) -> float:
    """Wall time of step `name` in a job's output."""
    found = parse(text)
    if name not in found:
        raise ValueError(f"step {name} did not run")
    return found[name].seconds
