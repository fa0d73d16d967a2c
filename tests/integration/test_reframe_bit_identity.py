"""ReFrame runs the FDB bit-identity check on this node, for real (fdb-write, fdb-read,
grib_compare), through the same entry point as the nightly: `bin/iostack nightly`, on every
input: the synthetic set, the published GRIB1 and GRIB2 sets (iostack.regression.samples, fetched from
PyPI) and a site directory of published model output (IOSTACK_SITE_GRIB)."""
import os
import pathlib
import shutil
import subprocess

import pytest

from iostack.core import paths
from support import targets
from iostack.regression import results, samples

pytestmark = pytest.mark.skipif(not shutil.which("fdb-write"), reason="FDB tools (fdb5) not installed")

# a site's output directory: GRIB files of several MARS key sets, and a file that is no GRIB
SITE_FILES = {"uv_on_different_levels.grib": 16, "multi_param_on_multi_dims.grib": 48,
              "regular_gg_ml_g2.grib": 3}
MESSAGES = {"synthetic": 3 * (4 * 3 + 2), "site": sum(SITE_FILES.values()),
            **{name: s.messages for name, s in samples.GRIB_SETS.items()}}
SCENARIOS = ("archive", "flip-one-bit", "empty-retrieve")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    cfgrib = samples.fetch("cfgrib", targets.settings().samples)
    site = tmp_path_factory.mktemp("site-output")
    for name in SITE_FILES:
        shutil.copy(cfgrib / name, site / name)
    (site / "README").write_text("model output of the site's last run\n")
    root = tmp_path_factory.mktemp("deploy-local")
    p = subprocess.run(
        [str(paths.REPO / "bin" / "iostack"), "nightly", "--site", "local", "--root", str(root),
         "--", "-S", "valid_prog_environs=builtin", "-n",
         "FdbBitIdentityCheck"],
        capture_output=True, text=True, env={**os.environ, "IOSTACK_SITE_GRIB": str(site)},
        timeout=900)
    print(p.stdout[-4000:], p.stderr[-2000:])
    assert "+ " in p.stdout and "reframe" in p.stdout  # the command is shown
    reports = results.run_reports(root / "reframe")
    assert reports, "ReFrame wrote no report"
    return p.returncode, results.read_report(reports[-1]), p.stdout


def _cases(data):
    return {(tc["grib_input"], tc["scenario"]): tc for tc in results.last_attempts(data).values()
            if results.check_of(tc) == "FdbBitIdentityCheck"}


def _value(case, var):
    return results.perf_values(case)[var].value


def test_every_input_and_scenario_passes(report):
    rc, data, _ = report
    cases = _cases(data)
    assert sorted(cases) == sorted((i, s) for i in MESSAGES for s in SCENARIOS)
    assert {k: tc["result"] for k, tc in cases.items()} == {k: "pass" for k in cases}
    assert rc == 0


@pytest.mark.parametrize("grib_input", sorted(MESSAGES))
def test_per_message_counts_are_in_the_report(report, grib_input):
    cases = _cases(report[1])
    n = MESSAGES[grib_input]
    assert _value(cases[grib_input, "archive"], "messages_identical_by_request") == n
    assert _value(cases[grib_input, "archive"], "messages_identical_by_extract") == n
    assert _value(cases[grib_input, "flip-one-bit"], "messages_identical_by_request") == n - 1
    assert _value(cases[grib_input, "empty-retrieve"], "messages_identical_by_request") == 0


def test_a_stream_this_fdb_cannot_expand_is_named_and_retrieved_raw(report):
    case = _cases(report[1])["published-grib1", "archive"]
    out = (pathlib.Path(case["outputdir"]) / case["job_stdout"]).read_text()
    if "/usr/bin/fdb-read" != shutil.which("fdb-read"):
        pytest.skip("another FDB than Debian's 5.10.8 is on PATH")
    # the nightly's own output names it too
    assert ("FdbBitIdentityCheck %grib_input=published-grib1 %scenario=archive: fdbretrieve: "
            "request 1 class=ea stream=enda: fdb-read cannot expand it") in report[2]
    # FDB 5.10.8 (metkit 1.9) cannot expand ERA5's stream=enda; the rest expands
    assert ("fdbretrieve: request 1 class=ea stream=enda: fdb-read cannot expand it "
            "(Serious Bug: TypeParam: cannot find a context to expand 'param'); "
            "retrieved with --raw") in out
    assert "fdbretrieve: requests=4 expanded=3 raw=1" in out
    assert _value(case, "requests_retrieved_raw") == 1


@pytest.fixture(scope="module")
def one_message_report(tmp_path_factory):
    """A site's GRIB file of one field: fdb-write says `FDB archive 1 message`."""
    site = tmp_path_factory.mktemp("one-field") / "one.grib"
    source = samples.fetch("cfgrib", targets.settings().samples) / "regular_gg_ml_g2.grib"
    subprocess.run(["grib_copy", "-w", "count=1", str(source), str(site)], check=True)
    root = tmp_path_factory.mktemp("deploy-local")
    p = subprocess.run(
        [str(paths.REPO / "bin" / "iostack"), "nightly", "--site", "local", "--root", str(root),
         "--", "-S", "valid_prog_environs=builtin", "-n", "FdbBitIdentityCheck%grib_input=site"],
        capture_output=True, text=True, env={**os.environ, "IOSTACK_SITE_GRIB": str(site)},
        timeout=900)
    print(p.stdout[-4000:], p.stderr[-2000:])
    return p.returncode, results.read_report(results.run_reports(root / "reframe")[-1])


def test_a_one_message_input_passes_every_scenario(one_message_report):
    rc, data = one_message_report
    cases = _cases(data)
    assert sorted(cases) == [("site", s) for s in sorted(SCENARIOS)]
    assert {k: tc["result"] for k, tc in cases.items()} == {k: "pass" for k in cases}
    out = (pathlib.Path(cases["site", "archive"]["outputdir"])
           / cases["site", "archive"]["job_stdout"]).read_text()
    assert "FDB archive 1 message" in out     # singular: the pattern must take it
    assert _value(cases["site", "archive"], "messages_identical_by_request") == 1
    assert _value(cases["site", "flip-one-bit"], "messages_identical_by_request") == 0
    assert rc == 0
