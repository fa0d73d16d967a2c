"""The `local` nightly for real, through `bin/iostack nightly`, on Debian's packages
(`builtin`): FDB bit-identity and FDB throughput; then `report` draws it and `record-baseline` writes
its values under the environment they ran in; an environment without a baseline fails until
one is recorded; zero selected test cases fail. The run is limited to these three checks
(`-n`): the applications' checks have their own tests, and this file's time stays bounded.
Its references are the committed ones, with `builtin` given a band no working FDB leaves
(tests/support/node_references.py): CI's node is no reference."""
import hashlib
import os
import re
import shutil
import struct
import subprocess

import pytest

from iostack.core import paths
from iostack.regression import references, results
from support import node_references

pytestmark = pytest.mark.skipif(
    not all(shutil.which(p) for p in ("fdb-write", "fdb-hammer", "fio", "grib_set")),
    reason="FDB tools (fdb5), fio or ecCodes tools not installed")

IOSTACK = str(paths.REPO / "bin" / "iostack")
# Debian's packages (`builtin`): the `stack` environment needs a deployed Spack stack, which
# the spack tier tests (tests/spack), smoke check included; one pass per throughput
# variant: this tests the nightly, not FDB
# (-S, not -p: ReFrame 4.10 drops -p when it expands --mode's options)
THESE_CHECKS = ["-S", "valid_prog_environs=builtin",
                "-n", "FdbBitIdentityCheck%grib_input=synthetic", "-n", "FdbThroughputCheck",
                "-S", "FdbThroughputCheck.repeats=1"]


def iostack(*args, env=None, timeout=900):
    p = subprocess.run([IOSTACK, *args], capture_output=True, text=True,
                       env={**os.environ, **(env or {})}, timeout=timeout)
    print(p.stdout[-6000:], p.stderr[-3000:])
    return p


def refused_when_dirty(p, report):
    """record-baseline refuses a session that ran on uncommitted code: from a tree with
    changes (a developer's), that refusal, in one line, is the outcome to check."""
    if report["session_info"]["commit"].endswith("-dirty"):
        said = (p.stdout + p.stderr).strip().splitlines()
        assert p.returncode != 0 and "ran on uncommitted code" in said[-1]
        pytest.skip("the checkout has uncommitted changes: record-baseline refused its "
                    "sessions, as it must")


def newest_report(root):
    reports = results.run_reports(root / "reframe")
    assert reports, "ReFrame wrote no report"
    return results.read_report(reports[-1])


def keyed(recorded, partition, environ):
    """{node: entries} of the keys of a partition and environment."""
    return {references.node_of(k): v for k, v in recorded.items()
            if references.split_key(k) == (partition, environ)}


def committed_release_references():
    """The committed FdbThroughputCheck references of the release's FDB on `local` (the dev
    VM's, keyed by its node)."""
    return keyed(references.load(references.REFERENCES_DIR / "fdb_throughput.yaml")[
        "FdbThroughputCheck"]["references"], "local:default", "stack")


def cases(report, check=None):
    """Each case's last attempt (the nightly mode retries once), of one check or all."""
    return [tc for tc in results.last_attempts(report).values()
            if check in (None, results.check_of(tc))]


@pytest.fixture(scope="module")
def nightly(tmp_path_factory):
    root = tmp_path_factory.mktemp("deploy-local")
    env = node_references.widened(tmp_path_factory.mktemp("references"))
    p = iostack("nightly", "--site", "local", "--root", str(root), "--", *THESE_CHECKS, env=env)
    return p, newest_report(root), root


def test_every_case_of_the_nightly_passes(nightly):
    p, report, _ = nightly
    failed = {tc["name"]: tc["fail_reason"] for tc in cases(report)
              if tc["result"] not in ("pass", "skip")}
    assert failed == {}
    by_check = {}
    for tc in cases(report):
        by_check.setdefault(results.check_of(tc), []).append(tc["result"])
    assert by_check["FdbBitIdentityCheck"] == ["pass"] * 3
    # the nightly's throughput variants: fdb-hammer at the three durabilities, and the key
    # path at FDB's default one, which needs the release's fdb-archive-bench: Debian's
    # environment skips it, naming why
    assert sorted(by_check["FdbThroughputCheck"]) == ["pass"] * 3 + ["skip"]
    (key,) = [tc for tc in cases(report, "FdbThroughputCheck") if "%path=key" in tc["name"]]
    assert key["result"] == "skip"
    assert p.returncode == 0


def test_throughput_values_are_present_and_sane(nightly):
    _, report, _ = nightly
    throughput = [tc for tc in cases(report, "FdbThroughputCheck") if tc["result"] == "pass"]
    assert {tc["size"] for tc in throughput} == {"small"} and len(throughput) == 3
    for tc in throughput:
        values = results.perf_values(tc)
        read = {"fdb_read_bw"} if tc["path"] == "message" else set()
        gated = {"fdb_write_ratio", "fdb_write_bw", "fdb_cpu_per_gib"}
        # each gated figure with the spread of its in-run repeats beside it, and what a
        # field costs (us_per_field, beyond the raw write)
        assert gated | {"fdb_write_ratio_spread", "fdb_write_bw_spread", "raw_write_bw",
                        "us_per_field",
                        "overhead_us_per_field"} | read <= set(values), sorted(values)
        ratio, ref, lower = values["fdb_write_ratio"][:3]
        assert 0.01 < ratio < 20 and values["fdb_write_ratio"][4] == "ratio"
        # judged against its own environment's baseline (the test's band), not the release's
        # committed one nor the no-baseline placeholder
        assert not references.is_no_baseline(ref) and lower == node_references.LOWER
        for var in {"fdb_write_bw", "raw_write_bw"} | read:
            assert values[var][0] > 1 and values[var][0] < 1e6 and values[var][4] == "MiB/s", var
        assert 0 < values["fdb_cpu_per_gib"][0] < 1000 and values["fdb_cpu_per_gib"][4] == "s/GiB"


def test_the_session_names_the_stack_it_ran_on(nightly):
    _, report, root = nightly
    info = report["session_info"]
    lock = paths.SPACK_ENV_SITES / "local" / "spack.lock"
    assert info["spack_lock_sha256"] == hashlib.sha256(lock.read_bytes()).hexdigest()
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", info["commit"]) and info["site"] == "local"
    junit = (root / "reframe" / "reports" / "junit-nightly.xml").read_text()
    assert junit.count("<testcase ") >= 3 + 4


def assert_real_png(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 400 and height >= 200


def test_report_draws_the_stored_session(nightly, tmp_path):
    _, report, root = nightly
    p = iostack("report", "--site", "local", "--root", str(root), "--out", str(tmp_path))
    assert p.returncode == 0
    page = (tmp_path / "index.html").read_text()
    pngs = sorted(tmp_path.glob("*.png"))
    assert {f"FdbThroughputCheck__{v}.png" for v in
            ("fdb_write_ratio", "fdb_write_bw", "raw_write_bw", "fdb_read_bw")} <= {p.name for p in pngs}
    assert set(re.findall(r"<img src='([^']+)'", page)) == {p.name for p in pngs}
    for png in pngs:
        assert_real_png(png)
    assert report["session_info"]["uuid"] in page
    latest = re.search(r"<table class='latest'>.*?</table>", page, re.S).group(0)
    info = report["session_info"]
    assert latest.count("<td class='result'>PASS</td>") == info["num_cases"] - info["num_skipped"]


def test_record_baseline_writes_the_run_with_its_provenance(nightly, tmp_path):
    _, report, root = nightly
    shutil.copytree(references.REFERENCES_DIR, tmp_path, dirs_exist_ok=True)
    p = iostack("record-baseline", "--site", "local", "--root", str(root),
                "--check", "FdbThroughputCheck", "--references-dir", str(tmp_path))
    refused_when_dirty(p, report)
    assert p.returncode == 0
    section = references.load(tmp_path / "fdb_throughput.yaml")["FdbThroughputCheck"]
    # under the environment it ran in; the release's (`stack`) entries are left as they were
    # ... and the node it ran on (this one's, as its jobs named it)
    (node,) = {tc["node_key"] for tc in cases(report, "FdbThroughputCheck")}
    recorded = section["references"][f"local:default+builtin@{node}"]
    assert keyed(section["references"], "local:default", "stack") == \
        committed_release_references()
    session = report["session_info"]
    for tc in cases(report, "FdbThroughputCheck"):
        if tc["result"] == "skip":
            continue
        entry = recorded[tc["reference_variant"]]["fdb_write_ratio"]
        assert entry["value"] == pytest.approx(results.perf_values(tc)["fdb_write_ratio"][0])
        assert entry["provenance"]["session"] == session["uuid"]
        assert entry["provenance"]["commit"] == session["commit"]
        assert entry["provenance"]["spack_lock_sha256"] == session["spack_lock_sha256"]


ONE_VARIANT = ["-n", "FdbThroughputCheck%size=small%durability=sync-flush%path=message%buffer_mib=64",
               "-S", "valid_prog_environs=builtin", "-S", "FdbThroughputCheck.repeats=1",
               "--max-retries=0"]


def test_an_environment_without_baseline_fails_until_one_is_recorded(tmp_path):
    """The committed references hold the release's FDB (`local:default+stack`): Debian's
    FDB is a different program, and is not judged by them."""
    refs = tmp_path / "references"
    shutil.copytree(references.REFERENCES_DIR, refs)
    data = references.load(refs / "fdb_throughput.yaml")["FdbThroughputCheck"]["references"]
    assert keyed(data, "local:default", "stack") and not keyed(data, "local:default", "builtin")
    env = {"IOSTACK_RFM_REFERENCES": str(refs)}
    root = tmp_path / "root"

    p = iostack("nightly", "--site", "local", "--root", str(root), "--", *ONE_VARIANT, env=env)
    (tc,) = cases(newest_report(root), "FdbThroughputCheck")
    assert p.returncode != 0 and tc["result"] == "fail" and tc["fail_phase"] == "performance"
    assert all(references.is_no_baseline(pv.ref) for var, pv in results.perf_values(tc).items()
               if var in ("fdb_write_ratio", "fdb_write_bw", "fdb_cpu_per_gib"))
    assert "no baseline for local:default+builtin" in p.stdout
    assert ("bin/iostack record-baseline --site local --system local --check FdbThroughputCheck"
            in p.stdout)

    # bands set by hand that no run of this machine crosses, loaded or not: this tests the
    # baseline's presence, not the machine's speed
    p = iostack("record-baseline", "--site", "local", "--root", str(root),
                "--references-dir", str(refs), "--lower", "0.99", "--upper", "99", env=env)
    refused_when_dirty(p, newest_report(root))
    assert p.returncode == 0
    p = iostack("nightly", "--site", "local", "--root", str(root), "--", *ONE_VARIANT, env=env)
    (tc,) = cases(newest_report(root), "FdbThroughputCheck")
    assert tc["result"] == "pass" and p.returncode == 0
    data = references.load(refs / "fdb_throughput.yaml")["FdbThroughputCheck"]["references"]
    assert keyed(data, "local:default", "builtin") and \
        keyed(data, "local:default", "stack") == committed_release_references()


def test_another_node_is_judged_by_ratios_until_it_records_its_own_baseline(tmp_path):
    """`local` recorded by node A, run on node B (IOSTACK_NODE plays it): A's absolute
    figures, which no node reaches (1e9 MiB/s), never judge B; A's ratio does, with a band
    no working FDB leaves; the nightly passes and says in one line that B needs
    record-baseline. Once B's own is recorded, B's absolute figures are judged by it."""
    refs = tmp_path / "references"
    shutil.copytree(references.REFERENCES_DIR, refs)
    path = refs / "fdb_throughput.yaml"
    data = references.load(path)
    section = data["FdbThroughputCheck"]
    prov = {"recorded": "2026-11-26T05:00:00Z", "commit": "0" * 40, "spack_lock_sha256": "ab",
            "session": "s", "node": {"host": "node-a"}}
    variant = references.variant_key({"size": "small", "durability": "sync-flush",
                                      "path": "message", "buffer_mib": 64})
    key_a = references.key("local:default", "builtin", "node-a")
    references.record(section, key_a, variant, "fdb_write_ratio", 1.0, "ratio", prov,
                      lower=-0.99, upper=99.0)
    references.record(section, key_a, variant, "fdb_write_bw", 1e9, "MiB/s", prov, lower=-0.05)
    references.record(section, key_a, variant, "fdb_cpu_per_gib", 1e-9, "s/GiB", prov,
                      upper=0.05)
    references.dump(path, data)
    env = {"IOSTACK_RFM_REFERENCES": str(refs), "IOSTACK_NODE": "node-b"}
    root = tmp_path / "root"

    p = iostack("nightly", "--site", "local", "--root", str(root), "--", *ONE_VARIANT, env=env)
    (tc,) = cases(newest_report(root), "FdbThroughputCheck")
    assert tc["result"] == "pass" and p.returncode == 0 and tc["node_key"] == "node-b"
    values = results.perf_values(tc)
    assert values["fdb_write_ratio"].ref == 1.0            # A's ratio judges B
    assert values["fdb_write_bw"].ref == 0 and values["fdb_write_bw"].lower is None
    # the nightly's one line (the check's own warning says it in ReFrame's output too)
    notice = [line for line in p.stdout.splitlines() if line.startswith("iostack: node ")]
    assert notice == ["iostack: node node-b has no baseline of its own (FdbThroughputCheck): "
                      "only figures that transfer between nodes were judged; after a passing "
                      "nightly, `bin/iostack record-baseline --site local --system local` "
                      "records its own"]

    p = iostack("record-baseline", "--site", "local", "--root", str(root), "--check",
                "FdbThroughputCheck", "--references-dir", str(refs), "--lower", "0.99",
                "--upper", "99", env=env)
    refused_when_dirty(p, newest_report(root))
    assert p.returncode == 0
    own = references.load(path)["FdbThroughputCheck"]["references"]
    assert set(keyed(own, "local:default", "builtin")) == {"node-a", "node-b"}
    p = iostack("nightly", "--site", "local", "--root", str(root), "--", *ONE_VARIANT, env=env)
    (tc,) = cases(newest_report(root), "FdbThroughputCheck")
    assert tc["result"] == "pass" and p.returncode == 0
    bw = results.perf_values(tc)["fdb_write_bw"]
    assert bw.ref == pytest.approx(own["local:default+builtin@node-b"][variant]["fdb_write_bw"][
        "value"]) and bw.lower == -0.99                    # B's own, judged
    assert not [line for line in p.stdout.splitlines() if "has no baseline of its own" in line]


def test_zero_selected_test_cases_fail(tmp_path):
    p = iostack("nightly", "--site", "local", "--root", str(tmp_path), "--", "-n", "NoSuchCheck")
    assert p.returncode == 3
    assert "ran no test case" in p.stdout and "#3599" in p.stdout
