"""The nightly's stored results, as `nightly`, `report` and `record-baseline` read them:
ReFrame's results DB (read through ReFrame itself, `reframe --describe-stored-sessions`, so
they see what `--performance-compare` and `--list-stored-sessions` see) and the JSON run
report of each session.

A stored session and a run report have the same shape: `session_info`, and `runs`, the
first run and then one per retry, each with its `testcases`; `store()` puts a run report
whose session was not stored (an unusable DB) into the DB, through ReFrame's own storage.
"""
from __future__ import annotations

import json
import os
import pathlib
from typing import NamedTuple

from iostack.core import paths
from iostack.core.errors import Failed
from iostack.core.process import capture
from iostack.deployment import layout
from iostack.regression import reframe

ALL_TIME = "19700101T0000+0000:now"


def stored_sessions(system: str, root: pathlib.Path, period: str = ALL_TIME) -> list[dict]:
    """Sessions of the results DB under `root` (oldest first), as ReFrame describes them."""
    exe = paths.venv() / "bin" / "reframe"
    cmd = [str(exe), "-C", str(paths.REFRAME_CONFIG), "--system", system,
           "--describe-stored-sessions", period]
    proc = capture(cmd, env_extra=reframe.environment(root))
    if proc.returncode != 0:
        raise Failed(f"reading the results DB failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    try:
        sessions = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise Failed(f"ReFrame did not print sessions as JSON:\n{proc.stdout[:2000]}") from None
    return sorted(sessions, key=lambda s: s["session_info"].get("time_start_unix", 0))


def run_reports(state: pathlib.Path) -> list[pathlib.Path]:
    """The JSON run reports under a ReFrame state directory (<root>/reframe), oldest first."""
    return sorted((state / "reports").glob("run-report-*.json"), key=os.path.getmtime)


def read_report(path: pathlib.Path) -> dict:
    return json.loads(path.read_text())


def store(system: str, root: pathlib.Path, report_path: pathlib.Path) -> str:
    """Store a run report's session in the results DB under `root` with ReFrame's storage
    backend (its DB lock, its schema), as `reframe -r` does at the end of a run; returns the
    session UUID. Runs in this process: the CLI's, once per command."""
    try:
        report = read_report(report_path)
        uuid = report["session_info"]["uuid"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise Failed(f"{report_path} is not a ReFrame run report: {e}") from e
    os.environ.update({k: str(v) for k, v in reframe.environment(root).items()})
    import sqlite3

    import reframe.core.config as rfm_config
    import reframe.core.runtime as rfm_runtime
    from reframe.core.exceptions import ReframeError
    from reframe.frontend.reporting.storage import StorageBackend

    site_config = rfm_config.load_config(str(paths.REFRAME_CONFIG))
    if os.environ.get("RFM_SQLITE_DB_FILE"):   # the CLI applies it; do as it does
        site_config.add_sticky_option("storage/sqlite_db_file", os.environ["RFM_SQLITE_DB_FILE"])
    site_config.select_subconfig(system)
    rfm_runtime.init_runtime(site_config)
    db = layout.results_db(root)
    try:
        return StorageBackend.default().store(report, str(report_path))
    except sqlite3.IntegrityError:
        raise Failed(f"session {uuid} of {report_path} is already in the results DB {db}") from None
    except (sqlite3.Error, ReframeError, OSError) as e:
        raise Failed(f"storing {report_path} in the results DB {db} failed: {e}") from e


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
