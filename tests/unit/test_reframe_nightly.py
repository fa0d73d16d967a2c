"""bin/iostack nightly: zero selected test cases fail, sessions name their stack, and a
missing baseline is explained with the command that records one."""
import json
import re

import pytest

from iostack import nightly, reframe


def fake_reframe(tmp_path, monkeypatch, report, rc=0):
    calls = []

    def run(system, root, extra=(), mode=None, env_extra=None):
        calls.append({"system": system, "extra": list(extra), "mode": mode, "env": env_extra})
        if report is not None:
            reports = root / "reframe" / "reports"
            reports.mkdir(parents=True, exist_ok=True)
            (reports / f"run-report-{len(calls)}.json").write_text(json.dumps(report))
        return rc

    monkeypatch.setattr(reframe, "reframe", run)
    return calls


def test_no_test_case_is_a_failure_with_a_reason(tmp_path, monkeypatch, capsys):
    fake_reframe(tmp_path, monkeypatch, {"session_info": {"num_cases": 0}, "runs": []})
    assert nightly.run("local", "local", tmp_path, ["-n", "Nothing"], "nightly") == nightly.RC_NO_TESTS
    out = capsys.readouterr().out
    assert "ran no test case" in out and "#3599" in out and "-n Nothing" in out


def test_no_report_at_all_is_a_failure_too(tmp_path, monkeypatch):
    fake_reframe(tmp_path, monkeypatch, None)
    assert nightly.run("local", "local", tmp_path) == nightly.RC_NO_TESTS


def test_an_old_report_does_not_count(tmp_path, monkeypatch):
    old = tmp_path / "reframe" / "reports" / "run-report-9.json"
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps({"session_info": {"num_cases": 5}, "runs": []}))
    fake_reframe(tmp_path, monkeypatch, None)
    assert nightly.run("local", "local", tmp_path) == nightly.RC_NO_TESTS


def test_a_failing_run_keeps_its_own_exit_code(tmp_path, monkeypatch):
    fake_reframe(tmp_path, monkeypatch, {"session_info": {"num_cases": 0}, "runs": []}, rc=1)
    assert nightly.run("local", "local", tmp_path) == 1


def test_sessions_carry_commit_and_spack_lock_hash(tmp_path, monkeypatch):
    calls = fake_reframe(tmp_path, monkeypatch, {"session_info": {"num_cases": 1}, "runs": []})
    assert nightly.run("local", "local-slurm", tmp_path, mode="weekly") == 0
    (call,) = calls
    assert call["system"] == "local-slurm" and call["mode"] == "weekly"
    i = call["extra"].index("--session-extras")
    extras = dict(kv.split("=", 1) for kv in call["extra"][i + 1].split(","))
    assert extras["site"] == "local"
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", extras["commit"])
    assert re.fullmatch(r"[0-9a-f]{64}", extras["spack_lock_sha256"])
    assert extras["spack_lock_sha256"] == nightly.spack_lock_sha256("local")


def test_missing_baselines_are_explained(tmp_path, monkeypatch, capsys):
    tc = {"name": "FdbThroughputCheck %size=small", "system": "local-slurm",
          "partition": "default", "result": "fail", "fail_phase": "performance",
          "perfvalues": {"local-slurm:default:fdb_write_ratio":
                         [0.3, 1.7976931348623157e308, 0, None, "ratio", "fail"]}}
    fake_reframe(tmp_path, monkeypatch, {"session_info": {"num_cases": 1},
                                         "runs": [{"testcases": [tc]}]}, rc=1)
    assert nightly.run("local", "local-slurm", tmp_path) == 1
    out = capsys.readouterr().out
    assert ("bin/iostack record-baseline --site local --system local-slurm "
            "--check FdbThroughputCheck") in out


@pytest.mark.parametrize("fail_phase", ["sanity", None])
def test_other_failures_are_not_blamed_on_baselines(tmp_path, monkeypatch, capsys, fail_phase):
    tc = {"name": "X", "system": "local", "partition": "default", "result": "fail",
          "fail_phase": fail_phase, "perfvalues": {}}
    fake_reframe(tmp_path, monkeypatch, {"session_info": {"num_cases": 1},
                                         "runs": [{"testcases": [tc]}]}, rc=1)
    nightly.run("local", "local", tmp_path)
    assert "record-baseline" not in capsys.readouterr().out
