"""The nightly's stored results, as `nightly`, `report` and `record-baseline` read them:
ReFrame's results DB (read through ReFrame itself, `reframe --describe-stored-sessions`, so
they see what `--performance-compare` and `--list-stored-sessions` see) and the JSON run
report of each session.

A stored session and a run report have the same shape: `session_info`, and `runs`, the
first run and then one per retry, each with its `testcases`.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
from typing import NamedTuple

from iostack import paths, reframe
from iostack.run import die, show

ALL_TIME = "19700101T0000+0000:now"


def stored_sessions(system: str, root: pathlib.Path, period: str = ALL_TIME) -> list[dict]:
    """Sessions of the results DB under `root` (oldest first), as ReFrame describes them."""
    exe = paths.venv() / "bin" / "reframe"
    cmd = [str(exe), "-C", str(paths.REFRAME_CONFIG), "--system", system,
           "--describe-stored-sessions", period]
    env_extra = reframe.environment(root)
    show(cmd, env_extra)
    env = dict(os.environ, **{k: str(v) for k, v in env_extra.items()})
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        die(f"reading the results DB failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}", rc=1)
    try:
        sessions = json.loads(proc.stdout)
    except json.JSONDecodeError:
        die(f"ReFrame did not print sessions as JSON:\n{proc.stdout[:2000]}", rc=1)
    return sorted(sessions, key=lambda s: s["session_info"].get("time_start_unix", 0))


def run_reports(state: pathlib.Path) -> list[pathlib.Path]:
    """The JSON run reports under a ReFrame state directory (<root>/reframe), oldest first."""
    return sorted((state / "reports").glob("run-report-*.json"), key=os.path.getmtime)


def read_report(path: pathlib.Path) -> dict:
    return json.loads(path.read_text())


def last_attempts(session: dict) -> dict[tuple, dict]:
    """Each test case's final attempt in a session or run report (a retry replaces the
    earlier attempts), keyed by (name, system, partition, environment)."""
    cases = {}
    for run in session.get("runs", []):
        for tc in run["testcases"]:
            cases[(tc["name"], tc["system"], tc["partition"], tc.get("environ"))] = tc
    return cases


def check_of(tc: dict) -> str:
    """The check class of a test case (its name without the parameters)."""
    return tc["name"].split()[0]


class PerfValue(NamedTuple):
    """One performance variable of a test case, as ReFrame stores it."""

    value: float | None
    ref: float | None
    lower: float | None
    upper: float | None
    unit: str | None
    result: str | None


def perf_values(tc: dict) -> dict[str, PerfValue]:
    """A test case's performance variables by name (ReFrame keys them system:partition:name)."""
    return {key.split(":")[-1]: PerfValue(*(list(pv) + [None] * 6)[:6])
            for key, pv in (tc.get("perfvalues") or {}).items()}
