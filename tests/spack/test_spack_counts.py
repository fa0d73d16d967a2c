"""Work counts of the deployed `local` release (the tier's own deploy, `local_deploy`): its
fdb-archive-bench (FDB 5.13 from source) and ecCodes count per field what the committed
references for its build say (reframe-tests/references/counts/local-<hash7>.yaml), the same
build counts the same twice, and a 2% CPU regression injected in FDB's archive path fails
the check and names the function that grew, through `bin/iostack counts` and through the
nightly's WorkCountsCheck. The tier's times are in the run's summary."""
import os
import pathlib
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
OTHER = "grib-encode"   # counted beside KEY under the same preload: must not move


def committed_reference(root):
    """The committed reference of the release's build, read as the check reads it."""
    from iostack.regression import counts

    (release,) = (root / "releases").glob("2*")
    programs = counts.release_programs(release, "local")
    return counts.reference_file(programs.build)


WORKLOADS = ("fdb-archive-key", "fdb-archive-message", "fdb-retrieve", "grib-encode",
             "grib-decode", "netcdf-serial", "netcdf-c-combined", "pnetcdf-combined",
             "pnetcdf-batching", "ior-posix", "mdtest-files", "nvme-stage-in", "multio-fdb")
#: counted by system calls and bytes only
NO_INSTRUCTIONS = ("ior-posix", "mdtest-files", "nvme-stage-in")


def test_the_nightlys_counts_check_passes_on_the_committed_references_and_stores_the_counts(
        local_deploy, timings):
    """WorkCountsCheck as the nightly runs it (`bin/iostack counts check` in its job): the
    release counts what the committed references for its build say, and every workload's
    counts per field are performance values in the report and the results DB."""
    from iostack.regression import results
    from iostack.regression.counts import within_band

    root, _ = local_deploy
    ref = committed_reference(root)
    assert ref.is_file(), f"no committed count references for this build: {ref}"
    run = iostack("nightly", "--site", "local", "--root", root, "--", "-n", "WorkCountsCheck")
    timings[f"WorkCountsCheck in the nightly ({len(WORKLOADS)} workloads)"] = run.seconds
    # 0: passed, and its session is in the results DB (else the nightly's verdict is 4)
    assert run.returncode == 0, run.output
    reports = results.run_reports(root / "current" / "reframe")
    (tc,) = results.last_attempts(results.read_report(reports[-1])).values()
    assert tc["result"] == "pass"
    job_out = (pathlib.Path(tc["outputdir"]) / "rfm_job.out").read_text().splitlines()
    assert job_out[-1] == f"iostack: work counts within their bands ({ref.name})"
    values = results.perf_values(tc)
    committed = yaml.safe_load(ref.read_text())["workloads"]
    for workload in WORKLOADS:
        c = committed[workload]["counts"]
        if workload in NO_INSTRUCTIONS:
            assert f"{workload} instructions" not in values
            assert within_band(c["syscalls"], values[f"{workload} syscalls"].value)
        else:
            assert within_band(c["instructions"], values[f"{workload} instructions"].value)
        # every workload's syncs are gated
        assert within_band(c["syncs"], values[f"{workload} syncs"].value)
        assert c["syncs"]["tolerance"] is not None


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


def test_the_nightlys_counts_check_fails_on_an_injected_2_percent_naming_it(
        local_deploy, tmp_path, timings):
    """WorkCountsCheck, as the nightly runs it, on the release with the 2% busy loop
    preloaded: it fails on the first night, its failure names the count, the change and
    the function that grew. Two workloads only (the check's `workloads`): the clean night
    above counts all of them."""
    from iostack.regression import results

    root, _ = local_deploy
    shim = tmp_path / "archive_slowdown.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", shim, SHIM, "-ldl"], check=True)
    committed = yaml.safe_load(committed_reference(root).read_text())
    per_field = committed["workloads"][KEY]["counts"]["instructions"]["value"]
    run = iostack("nightly", "--site", "local", "--root", root, "--", "-n", "WorkCountsCheck",
                  "-S", f"WorkCountsCheck.workloads={KEY},{OTHER}",
                  env={"LD_PRELOAD": str(shim),
                       "IOSTACK_INJECT_INSTRUCTIONS": str(int(0.02 * per_field))})
    timings["WorkCountsCheck in the nightly, injected"] = run.seconds
    assert run.returncode != 0
    reports = results.run_reports(root / "current" / "reframe")
    (tc,) = results.last_attempts(results.read_report(reports[-1])).values()
    assert tc["result"] == "fail" and tc["fail_phase"] == "sanity"
    reason = tc["fail_reason"]
    assert f"{KEY}: instructions per field " in reason, reason
    assert "grew: iostack_injected_busy_loop +" in reason
    change = float(reason.split(f"{KEY}: instructions per field ")[1].split("(")[1].split("%")[0])
    assert abs(change - 2.0) < 0.2   # per cent: the 2% loop, to its last 0.2%
    # the fail names no other workload's counts: the shim hooks the key path only (not FDB's
    # message path: preloading this shim moves its instructions by 0.2%, twice its band)
    assert OTHER not in reason
    job_out = (pathlib.Path(tc["stagedir"]) / "rfm_job.out").read_text()
    counted = {line.split(":")[0] for line in job_out.splitlines() if line.startswith(WORKLOADS)}
    assert counted == {KEY, OTHER}
    # a failed night stores no performance values (ReFrame skips that stage): the clean
    # night's test above shows them


def test_darshans_operation_counts_are_held_to_the_builds_and_an_extra_sync_fails(
        local_deploy, tmp_path, timings):
    """DarshanProfileCheck's fdb-archive-bench case as the nightly runs it: its operation
    counts equal the committed ones of this build (references/counts/darshan-local.yaml);
    with one more fdatasync after every flush (the shim's IOSTACK_INJECT_SYNC, preloaded
    beside Darshan) the check fails, naming the syncs that moved."""
    from iostack.regression import results

    root, _ = local_deploy
    select = ["--", "-n", "DarshanProfileCheck%program=fdb-archive"]
    run = iostack("nightly", "--site", "local", "--root", root, *select)
    timings["DarshanProfileCheck fdb-archive, against the build's counts"] = run.seconds
    assert run.returncode == 0, run.output
    shim = tmp_path / "archive_slowdown.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", shim, SHIM, "-ldl"], check=True)
    run = iostack("nightly", "--site", "local", "--root", root, *select,
                  env={"LD_PRELOAD": str(shim), "IOSTACK_INJECT_SYNC": "1"})
    timings["DarshanProfileCheck fdb-archive, one more sync a flush"] = run.seconds
    assert run.returncode != 0
    reports = results.run_reports(root / "current" / "reframe")
    (tc,) = results.last_attempts(results.read_report(reports[-1])).values()
    reason = tc["fail_reason"]
    recorded = yaml.safe_load((paths.REFRAME_DIR / "references" / "counts" /
                               "darshan-local.yaml").read_text())["fdb-archive"]["counts"]
    assert "Darshan's counts of fdb-archive moved from darshan-local.yaml" in reason, reason
    synced = int(reason.split("posix_syncs: ")[1].split()[0])
    assert synced > recorded["posix_syncs"]
