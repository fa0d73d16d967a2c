"""The real ReFrame run report the unit tests read (tests/data/reframe/run-report-tiny.json,
from tests/data/reframe/tiny_checks.py) is what the ReFrame set-up installs writes: run the
checks again and compare. IOSTACK_REGENERATE_REPORTS=1 rewrites the committed report."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest

from iostack.core import paths
from iostack.regression import reframe

DATA = paths.REPO / "tests" / "data" / "reframe"
COMMITTED = DATA / "run-report-tiny.json"


def run_tiny_checks(work: pathlib.Path) -> dict:
    """A real `reframe -r` of the tiny checks on system `local`, its JSON run report."""
    report = work / "run-report-tiny.json"
    env = {**os.environ, **{k: str(v) for k, v in reframe.environment(work / "root").items()}}
    p = subprocess.run([str(paths.venv() / "bin" / "reframe"), "-C", str(paths.REFRAME_CONFIG),
                        "--system", "local", "--prefix", str(work / "out"),
                        "-c", str(DATA / "tiny_checks.py"), "-r", "--report-file", str(report),
                        "--session-extras", "site=local,commit=" + "0" * 40],
                       capture_output=True, text=True, env=env, cwd=work, timeout=600)
    assert report.is_file(), p.stdout[-3000:] + p.stderr[-2000:]
    return json.loads(report.read_text())


def shape(report: dict) -> dict:
    """What the unit tests rely on: the keys at each level and each case's outcome."""
    cases = report["runs"][0]["testcases"]
    return {
        "top": sorted(report), "session_info": sorted(report["session_info"]),
        "testcase": sorted(cases[0]),
        "outcomes": sorted((tc["name"], tc["result"], tc["fail_phase"],
                            tuple((k.split(":", 2)[2], len(v), v[4], v[5])
                                  for k, v in tc["perfvalues"].items())) for tc in cases),
    }


def test_the_committed_report_is_what_reframe_writes(tmp_path):
    if not (paths.venv() / "bin" / "reframe").exists():
        pytest.skip("ReFrame not installed (bin/iostack setup)")
    fresh = run_tiny_checks(tmp_path)
    if os.environ.get("IOSTACK_REGENERATE_REPORTS"):
        COMMITTED.write_text(json.dumps(fresh, indent=1) + "\n")
    assert shape(json.loads(COMMITTED.read_text())) == shape(fresh), (
        "ReFrame's run report changed shape: IOSTACK_REGENERATE_REPORTS=1 pytest " + __file__)
