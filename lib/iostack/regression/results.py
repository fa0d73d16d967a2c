"""The nightly's stored results, as `nightly`, `report` and `record-baseline` read them:
ReFrame's results DB (read through ReFrame itself, `reframe --describe-stored-sessions`, so
they see what `--performance-compare` and `--list-stored-sessions` see) and the JSON run
report of each session.

A stored session and a run report have the same shape: `session_info`, and `runs`, the
first run and then one per retry, each with its `testcases`; `store()` puts a run report
whose session was not stored (an unusable DB) into the DB, through ReFrame's own storage.
"""
from __future__ import annotations

import contextlib
import json
import os
import pathlib
import tempfile
from typing import NamedTuple

from iostack.core.errors import Failed
from iostack.core.process import capture
from iostack.regression import reframe
from iostack.site.target import Target

ALL_TIME = "19700101T0000+0000:now"


@contextlib.contextmanager
def _reading(target: Target):
    """ReFrame's environment for a command that only reads the results DB: its own log and
    run report go to a directory of their own, never into the deployment's state, where a
    reader run as root (record-baseline) would leave files the service account that writes
    there could not change."""
    with tempfile.TemporaryDirectory(prefix="iostack-rfm-read-") as tmp:
        yield {**reframe.environment(target), "IOSTACK_RFM_STATE": tmp}


def stored_sessions(target: Target, period: str = ALL_TIME) -> list[dict]:
    """Sessions of the target's results DB (oldest first), as ReFrame describes them."""
    exe = target.settings.venv / "bin" / "reframe"
    cmd = [str(exe), "-C", str(target.reframe_config), "--system", target.reframe_system,
           "--describe-stored-sessions", period]
    with _reading(target) as env:
        proc = capture(cmd, env_extra=env)
    if proc.returncode != 0:
        raise Failed(f"reading the results DB failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    try:
        sessions = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise Failed(f"ReFrame did not print sessions as JSON:\n{proc.stdout[:2000]}") from None
    return sorted(sessions, key=lambda s: s["session_info"].get("time_start_unix", 0))


def is_stored(target: Target, uuid: str) -> bool:
    """Whether the target's results DB holds session `uuid` (an unreadable DB: no)."""
    exe = target.settings.venv / "bin" / "reframe"
    with _reading(target) as env:
        proc = capture([str(exe), "-C", str(target.reframe_config), "--system",
                        target.reframe_system, "--describe-stored-sessions", uuid],
                       env_extra=env)
    try:
        return proc.returncode == 0 and any(
            s.get("session_info", {}).get("uuid") == uuid for s in json.loads(proc.stdout))
    except (json.JSONDecodeError, AttributeError):
        return False


#: how the comparison's two sides are named in ReFrame's table
LATEST, EARLIER = "latest", "earlier"
NO_DATA = "<no data>"


class Comparison(NamedTuple):
    """One row of ReFrame's --performance-compare: a performance variable of a test case,
    the median of each side, how many values each median is of, and the difference."""

    name: str
    sysenv: str
    var: str
    unit: str
    latest: float
    earlier: float
    latest_samples: int
    earlier_samples: int
    diff_percent: float


def comparison_command(target: Target, sessions: list[dict], period: str = ALL_TIME) -> list[str]:
    """ReFrame's `--performance-compare` of the latest of `sessions` against the ones before
    it in `period`, the median of each side (with how many values each is of), its table as
    tab-separated values."""
    info = sessions[-1]["session_info"]
    # sessions, not job completion times, split the sides: a session filter (ReFrame
    # evaluates it on each session's session_info)
    spec = (f"{info['uuid']}/{period}?time_start_unix < {info['time_start_unix']!r}"
            "/median:/+psamples")
    return [str(target.settings.venv / "bin" / "reframe"), "-C", str(target.reframe_config),
            "--system", target.reframe_system, "--performance-compare", spec,
            "--table-format", "csv",
            "--table-format-delim", "\t", "--term-lhs", LATEST, "--term-rhs", EARLIER]


def compare_latest(target: Target, sessions: list[dict],
                   period: str = ALL_TIME) -> list[Comparison]:
    """The latest of `sessions` (the target's results DB's) against the ones before it in
    `period`, as ReFrame compares them (comparison_command). Variables the earlier sessions
    lack are left out."""
    if len(sessions) < 2:
        return []
    with _reading(target) as env:
        proc = capture(comparison_command(target, sessions, period), env_extra=env)
    if proc.returncode != 0:
        raise Failed(f"comparing the sessions' performance failed:\n{proc.stdout[-2000:]}"
                     f"{proc.stderr[-2000:]}")
    return parse_comparison(proc.stdout)


def parse_comparison(text: str) -> list[Comparison]:
    """The rows of a `--performance-compare ... /median:/+psamples` table that ReFrame
    printed as tab-separated values (other lines, such as warnings, are not the table)."""
    columns = ["name", "sysenv", "pvar", "punit", f"pval (median) ({LATEST})",
               f"pval (median) ({EARLIER})", f"psamples ({LATEST})", f"psamples ({EARLIER})",
               "pdiff (%)"]
    lines = text.splitlines()
    header = "\t".join(columns)
    if header not in lines:
        raise Failed(f"ReFrame did not print the comparison table ({header!r}):\n{text[:2000]}")
    rows = []
    for line in lines[lines.index(header) + 1:]:
        fields = line.split("\t")
        if len(fields) != len(columns):
            break
        name, sysenv, var, unit, latest, earlier, n_latest, n_earlier, diff = fields
        if earlier == NO_DATA:  # what ReFrame prints when no earlier session has a value
            continue
        try:
            rows.append(Comparison(name, sysenv, var, unit, float(latest), float(earlier),
                                   int(n_latest), int(n_earlier), float(diff)))
        except ValueError:
            raise Failed(f"ReFrame's comparison row is not numbers: {line!r}") from None
    return rows


def run_reports(state: pathlib.Path) -> list[pathlib.Path]:
    """The JSON run reports under a ReFrame state directory (<root>/reframe), oldest first."""
    return sorted((state / "reports").glob("run-report-*.json"), key=os.path.getmtime)


def read_report(path: pathlib.Path) -> dict:
    return json.loads(path.read_text())


def store(target: Target, report_path: pathlib.Path) -> str:
    """Store a run report's session in the target's results DB with ReFrame's storage
    backend (its DB lock, its schema), as `reframe -r` does at the end of a run; returns the
    session UUID. ReFrame has no command for it: its storage module runs in a child process
    (iostack.regression.storage), given the run's environment as `reframe` is."""
    try:
        report = read_report(report_path)
        report["session_info"]["uuid"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise Failed(f"{report_path} is not a ReFrame run report: {e}") from e
    proc = capture([target.settings.python, "-m", "iostack.regression.storage",
                    str(target.reframe_config), target.reframe_system, str(report_path)],
                   env_extra=reframe.environment(target))
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise Failed(lines[-1].removeprefix("iostack: error: ") if lines else
                     f"storing {report_path} failed (exit {proc.returncode})")
    return proc.stdout.strip().splitlines()[-1]


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


def series(sessions: list[dict], system: str, case: tuple, var: str,
           node: str | None = None) -> list[tuple[float, float]]:
    """(session start, value) of a perf variable of one test case, `case` being its
    (name, partition, environment), over `sessions` (oldest first): every night it ran to
    its performance stage (its sanity passed); with `node`, not the nights another node ran
    (a night stored before results named their node counts)."""
    name, partition, environ = case
    out = []
    for session in sessions:
        tc = last_attempts(session).get((name, system, partition, environ))
        if tc is None or not (tc.get("result") == "pass" or tc.get("fail_phase") == "performance"):
            continue
        if node and tc.get("node_key") and tc["node_key"] != node:
            continue
        pv = perf_values(tc).get(var)
        if pv is not None and isinstance(pv.value, (int, float)):
            out.append((session["session_info"].get("time_start_unix") or 0, float(pv.value)))
    return out


def perf_values(tc: dict) -> dict[str, PerfValue]:
    """A test case's performance variables by name (ReFrame keys them system:partition:name)."""
    return {key.split(":")[-1]: PerfValue(*(list(pv) + [None] * 6)[:6])
            for key, pv in (tc.get("perfvalues") or {}).items()}
