"""Work counts of the deployed `local` release (the tier's own deploy, `local_deploy`): its
fdb-archive-bench (FDB 5.13 from source) and ecCodes count per field what the committed
references for its build say (reframe-tests/references/counts/local-<hash7>.yaml), the same
build counts the same twice, and a 2% CPU regression injected in FDB's archive path fails
the check and names the function that grew. The tier's times are in the run's summary."""
import os
import platform
import shutil
import subprocess

import pytest
import yaml
from conftest import iostack

from iostack.core import paths

pytestmark = pytest.mark.skipif(
    not all(shutil.which(p) for p in ("gcc", "valgrind", "callgrind_annotate", "strace"))
    or platform.machine() != "x86_64",
    reason="needs gcc, valgrind and strace on x86_64 (the injected loop is x86 assembly)")

SHIM = paths.REPO / "tests" / "support" / "counts" / "archive_slowdown.c"
KEY = "fdb-archive-key"


def committed_reference(root):
    """The committed reference of the release's build, read as the check reads it."""
    from iostack.regression import counts

    (release,) = (root / "releases").glob("2*")
    programs = counts.release_programs(release, "local")
    return counts.reference_file(programs.build)


def test_the_release_counts_what_its_committed_references_say(local_deploy, timings):
    root, _ = local_deploy
    ref = committed_reference(root)
    assert ref.is_file(), f"no committed count references for this build: {ref}"
    run = iostack("counts", "check", "--root", root)
    timings["counts check local (5 workloads)"] = run.seconds
    assert run.returncode == 0, run.output
    assert run.stdout.splitlines()[-1] == f"iostack: work counts within their bands ({ref.name})"
    for workload in ("fdb-archive-key", "fdb-archive-message", "grib-encode", "grib-decode",
                     "netcdf-serial"):
        assert any(line.startswith(f"{workload}: instructions ") for line in run.stdout.splitlines())


def test_the_same_build_counts_the_same_twice(local_deploy, tmp_path, timings):
    root, _ = local_deploy
    out = tmp_path / "rerun.yaml"
    run = iostack("counts", "record", "--root", root, "--runs", 2, "--workload", KEY,
                  "--references", out)
    timings["counts record local (fdb-archive-key, 2 runs)"] = run.seconds
    assert run.returncode == 0, run.output
    c = yaml.safe_load(out.read_text())["workloads"][KEY]["counts"]
    # half the narrowest band: a rerun cannot trip the gate
    assert c["instructions"]["spread"] < 0.0005
    assert c["bytes written"]["spread"] == 0 and c["syncs"]["spread"] == 0
    committed = yaml.safe_load(committed_reference(root).read_text())
    expected = committed["workloads"][KEY]["counts"]["instructions"]["value"]
    assert abs(c["instructions"]["value"] - expected) < 0.001 * expected


def test_a_2_percent_cpu_regression_in_fdbs_archive_path_fails_and_is_named(
        local_deploy, tmp_path, timings):
    root, _ = local_deploy
    shim = tmp_path / "archive_slowdown.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", shim, SHIM, "-ldl"], check=True)
    committed = yaml.safe_load(committed_reference(root).read_text())
    per_field = committed["workloads"][KEY]["counts"]["instructions"]["value"]
    run = iostack("counts", "check", "--root", root, "--workload", KEY,
                  env={"LD_PRELOAD": str(shim),
                       "IOSTACK_INJECT_INSTRUCTIONS": str(int(0.02 * per_field))})
    timings["counts check local, injected (fdb-archive-key)"] = run.seconds
    assert run.returncode == 1
    assert len(run.error_lines) == 1 and "1 work count(s) moved" in run.error_lines[0]
    (moved,) = [line for line in run.stdout.splitlines() if line.startswith("MOVED")]
    assert moved.startswith(f"MOVED {KEY}: instructions per field ")
    change = float(moved.split("(")[1].split("%")[0]) / 100
    assert 0.018 < change < 0.022
    assert "grew: iostack_injected_busy_loop +" in moved
    assert os.environ.get("LD_PRELOAD") is None  # the shim went to that run only
