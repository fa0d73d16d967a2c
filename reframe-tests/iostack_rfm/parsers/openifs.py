"""OpenIFS run logs: ifs.stat and NODE.001_01, and the speed metric of seed 000,
forecast days per wall-clock day = forecast length in days * 86400 / wall seconds.

ifs.stat gets one line per model step (and a few per setup stage) from the master task:

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

import re
from dataclasses import dataclass

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
