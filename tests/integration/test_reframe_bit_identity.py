"""ReFrame runs the FDB bit-identity check on this node, for real (fdb-write, fdb-read,
grib_compare), through the same entry point as the nightly: `bin/iostack nightly`."""
import os
import shutil
import subprocess

import pytest

from iostack import paths, results

pytestmark = pytest.mark.skipif(not shutil.which("fdb-write"), reason="FDB tools (fdb5) not installed")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("deploy-local")
    p = subprocess.run(
        [str(paths.REPO / "bin" / "iostack"), "nightly", "--site", "local", "--root", str(root),
         "--", "-p", "builtin", "-n", "FdbBitIdentityCheck"],
        capture_output=True, text=True, env=dict(os.environ), timeout=600)
    print(p.stdout[-4000:], p.stderr[-2000:])
    assert "+ " in p.stdout and "reframe" in p.stdout  # the command is shown
    reports = results.run_reports(root / "reframe")
    assert reports, "ReFrame wrote no report"
    return p.returncode, results.read_report(reports[-1])


def _cases(data):
    return {tc["name"]: tc for tc in results.last_attempts(data).values()}


def test_all_scenarios_pass(report):
    rc, data = report
    cases = _cases(data)
    names = [n for n in cases if n.startswith("FdbBitIdentityCheck")]
    assert sorted(names) == sorted(f"FdbBitIdentityCheck %scenario={s}"
                                   for s in ("archive", "flip-one-bit", "empty-retrieve"))
    assert {n: cases[n]["result"] for n in names} == {n: "pass" for n in names}
    assert rc == 0


def test_per_message_counts_are_in_the_report(report):
    _, data = report
    cases = _cases(data)
    expected = 3 * (4 * 3 + 2)  # 3 steps x (4 pressure-level params x 3 levels + 2 surface)
    archive = cases["FdbBitIdentityCheck %scenario=archive"]
    flipped = cases["FdbBitIdentityCheck %scenario=flip-one-bit"]
    empty = cases["FdbBitIdentityCheck %scenario=empty-retrieve"]

    def value(case, var):
        return results.perf_values(case)[var].value

    assert value(archive, "messages_identical_by_request") == expected
    assert value(archive, "messages_identical_by_extract") == expected
    assert value(flipped, "messages_identical_by_request") == expected - 1
    assert value(empty, "messages_identical_by_request") == 0
