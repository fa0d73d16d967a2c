"""The real ReFrame run reports the unit tests read (tests/data/reframe: run-report-tiny.json,
report/*.json, and ReFrame's comparison of the series, report/series-compare.tsv) are what
the ReFrame set-up installs writes: run each recipe again (tests/support/reframe_runs.py)
and compare. IOSTACK_REGENERATE_REPORTS=1 rewrites the kept files."""
from __future__ import annotations

import json
import os

import pytest

from support import targets
from support import reframe_runs


def shape(report: dict) -> dict:
    """What the unit tests rely on: the keys at each level, the session's extras, and each
    attempt's outcome with its performance values (the checks print fixed values)."""
    info = report["session_info"]
    attempts = [(run["run_index"], tc) for run in report["runs"] for tc in run["testcases"]]
    return {
        "top": sorted(report), "session_info": sorted(info),
        "extras": {k: info.get(k) for k in ("site", "commit", "spack_lock_sha256", "release")},
        "testcase": sorted({key for _, tc in attempts for key in tc}),
        "outcomes": sorted((i, tc["name"], tc["result"], tc["fail_phase"],
                            tc.get("reference_variant"),
                            sorted((k, tuple(v)) for k, v in tc["perfvalues"].items()))
                           for i, tc in attempts),
    }


def test_the_kept_reports_are_what_reframe_writes(tmp_path):
    if not (targets.settings().venv / "bin" / "reframe").exists():
        pytest.skip("ReFrame not installed (bin/iostack setup)")
    made = reframe_runs.make_all(tmp_path)
    if os.environ.get("IOSTACK_REGENERATE_REPORTS"):
        for path, text in made.items():
            path.write_text(text)
    hint = "ReFrame's output changed: IOSTACK_REGENERATE_REPORTS=1 pytest " + __file__
    for path, text in made.items():
        if path.suffix == ".json":
            assert shape(json.loads(path.read_text())) == shape(json.loads(text)), (path, hint)
        else:   # the comparison: medians of fixed values, the same table every time
            assert path.read_text() == text, (path, hint)
