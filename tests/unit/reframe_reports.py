"""Run reports for the unit tests of what reads them (the nightly's verdict, the baseline,
the report page): the one ReFrame itself wrote for tests/data/reframe/tiny_checks.py
(tests/integration/test_reframe_report_data.py keeps it current), cut to the cases a test
needs, never a report format written by hand."""
from __future__ import annotations

import copy
import json

from iostack.core import paths

REPORT = json.loads((paths.REPO / "tests/data/reframe/run-report-tiny.json").read_text())
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
