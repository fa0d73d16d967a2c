"""Run reports for the unit tests of what reads them (the nightly's verdict, the baseline,
the report page): ones ReFrame itself wrote, for tests/data/reframe/tiny_checks.py and
report_checks.py (how each was made: tests/support/reframe_runs.py; the integration test
test_reframe_report_data.py keeps them current), never a report format written by hand."""
from __future__ import annotations

import copy
import json

from iostack.core import paths
from support.reframe_runs import SERIES

DATA = paths.REPO / "tests" / "data" / "reframe"
REPORT = json.loads((DATA / "run-report-tiny.json").read_text())
#: the tiny checks: within its band; failing its performance on the no-baseline reference;
#: failing its sanity
PASS, NO_BASELINE, SANITY_FAIL = "TinyPassCheck", "TinyNoBaselineCheck", "TinySanityFailCheck"


def real_report(*cases: str, uuid: str | None = None, system: str | None = None) -> dict:
    """The real report with only `cases` (default: all), its counts to match; `system`
    renames the system its cases ran on (in their perfvalues' keys too)."""
    report = copy.deepcopy(REPORT)
    run = report["runs"][0]
    run["testcases"] = [tc for tc in run["testcases"] if not cases or tc["name"] in cases]
    if system:
        for tc in run["testcases"]:
            tc["perfvalues"] = {f"{system}:{key.split(':', 1)[1]}": value
                                for key, value in tc["perfvalues"].items()}
            tc["system"] = system
    report["runs"] = [run]
    info = report["session_info"]
    info["num_cases"] = len(run["testcases"])
    info["num_failures"] = sum(tc["result"] == "fail" for tc in run["testcases"])
    if uuid:
        info["uuid"] = uuid
    return report


def kept(name: str) -> dict:
    """A kept report of report_checks.py (tests/data/reframe/report/<name>.json), as
    ReFrame wrote it."""
    return json.loads((DATA / "report" / f"{name}.json").read_text())


def series() -> list[dict]:
    """The nights of TinyThroughputCheck, TinyNewSystemCheck and TinySmokeCheck, oldest
    first (their values and releases: reframe_runs.SERIES)."""
    return [kept(f"series-{night}") for night in range(1, len(SERIES) + 1)]
