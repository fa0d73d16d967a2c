"""bin/iostack nightly: zero selected test cases fail, sessions name their stack, a
missing baseline is explained with the command that records one, and the verdict is true:
a session the DB did not store, a check that did not load, an unknown system or mode, a
run out of time each fail with one line saying so."""
import dataclasses
import json
import os
import re
import time

import pytest
from reframe_reports import NO_BASELINE, PASS, SANITY_FAIL, real_report

from iostack.core import filesystems, runlock
from iostack.core.errors import Failed, IostackError
from iostack.cli import render
from iostack.regression import nightly, reframe
from support import targets


def fake_reframe(tmp_path, monkeypatch, report, rc=0, stored=True, notes=None, timed_out=False,
                 listed=None):
    """ReFrame as the nightly sees it: the report it writes at --report-file, what it says
    about storing the session, and what `--list` loads (every check of the mode)."""
    calls = []
    in_db: set[str] = set()     # the results DB, as --describe-stored-sessions reads it

    def run(target, extra=(), mode=None, env_extra=None, deadline=None, pass_fds=()):
        calls.append({"system": target.reframe_system, "extra": list(extra), "mode": mode, "env": env_extra,
                      "deadline": deadline, "pass_fds": pass_fds})
        said = dict(notes or {})
        if report is not None:
            path = extra[list(extra).index("--report-file") + 1]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(report))
            if stored:
                in_db.add(report.get("session_info", {}).get("uuid"))
        return reframe.Outcome(rc, said, timed_out)

    def list_checks(target, mode=None, env_extra=None, select=(), partitions=False):
        if partitions:      # the health gate's question: no node check on these systems
            return reframe.Listing(0, set(), [], "")
        checks = nightly.MODES[mode].checks if listed is None else listed
        return reframe.Listing(0, set(checks), [], "")

    monkeypatch.setattr(reframe, "reframe", run)
    monkeypatch.setattr(reframe, "list_checks", list_checks)
    monkeypatch.setattr(reframe, "load_warnings", lambda target, mode=None, env_extra=None: [])
    monkeypatch.setattr(nightly.results, "is_stored", lambda target, uuid: uuid in in_db)
    # the node's packages and the checkout's commit, as dpkg and git would say them
    monkeypatch.setattr(nightly.packages, "missing_on_this_node", lambda purpose: [])
    monkeypatch.setattr(nightly.provenance, "git_commit", lambda: "c0ffee" * 6 + "c0ff")
    return calls


def test_no_test_case_is_a_failure_with_a_reason(tmp_path, monkeypatch, capsys):
    # ReFrame 4.10 with no case selected says PASSED, exits 0 and writes no report at all
    fake_reframe(tmp_path, monkeypatch, None)
    assert render(nightly.run(targets.of(tmp_path), ["-n", "Nothing"], "nightly")) == nightly.RC_NO_TESTS
    out = capsys.readouterr().out
    assert "ran no test case" in out and "#3599" in out and "-n Nothing" in out


def test_an_old_report_does_not_count(tmp_path, monkeypatch):
    old = tmp_path / "reframe" / "reports" / "run-report-9.json"
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps(real_report()))
    fake_reframe(tmp_path, monkeypatch, None)
    assert render(nightly.run(targets.of(tmp_path))) == nightly.RC_NO_TESTS


def test_a_failing_run_keeps_its_own_exit_code(tmp_path, monkeypatch):
    fake_reframe(tmp_path, monkeypatch, None, rc=1)
    assert render(nightly.run(targets.of(tmp_path))) == 1


def test_sessions_carry_commit_and_spack_lock_hash(tmp_path, monkeypatch):
    calls = fake_reframe(tmp_path, monkeypatch, real_report(PASS, uuid="u"))
    assert render(nightly.run(targets.of(tmp_path, system="local-slurm"), mode="weekly")) == 0
    (call,) = calls
    assert call["system"] == "local-slurm" and call["mode"] == "weekly"
    i = call["extra"].index("--session-extras")
    extras = dict(kv.split("=", 1) for kv in call["extra"][i + 1].split(","))
    assert extras["site"] == "local"
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", extras["commit"])
    assert re.fullmatch(r"[0-9a-f]{64}", extras["spack_lock_sha256"])
    assert extras["spack_lock_sha256"] == nightly.spack_lock_sha256(targets.of(tmp_path))


def test_missing_baselines_are_explained(tmp_path, monkeypatch, capsys):
    fake_reframe(tmp_path, monkeypatch, real_report(NO_BASELINE, PASS, system="local-slurm"),
                 rc=1)
    assert render(nightly.run(targets.of(tmp_path, system="local-slurm"))) == 1
    hints = [line for line in capsys.readouterr().out.splitlines() if "record-baseline" in line]
    assert hints == ["  TinyNoBaselineCheck @local-slurm:default+builtin: bin/iostack record-baseline "
                     "--site local --system local-slurm --check TinyNoBaselineCheck"]


def test_other_failures_are_not_blamed_on_baselines(tmp_path, monkeypatch, capsys):
    fake_reframe(tmp_path, monkeypatch, real_report(SANITY_FAIL, PASS), rc=1)
    render(nightly.run(targets.of(tmp_path)))
    assert "record-baseline" not in capsys.readouterr().out


def report_of(uuid="s-1", failures=0):
    """The real report, passed or with `failures` (1: the no-baseline case fails)."""
    return real_report(PASS, *([NO_BASELINE] if failures else []), uuid=uuid)


def test_each_run_reads_and_prints_its_own_report(tmp_path, monkeypatch, capsys):
    newer = tmp_path / "reframe" / "reports" / "run-report-99.json"
    newer.parent.mkdir(parents=True)
    newer.write_text(json.dumps(report_of("another-run")))
    calls = fake_reframe(tmp_path, monkeypatch, report_of("this-run"))
    assert render(nightly.run(targets.of(tmp_path))) == 0
    own = calls[0]["extra"][calls[0]["extra"].index("--report-file") + 1]
    os.utime(newer)         # the other run's report is the newest in the directory
    assert own != newer and json.loads(own.read_text())["session_info"]["uuid"] == "this-run"
    assert f"iostack: ReFrame report: {own}" in capsys.readouterr().out


def test_a_session_the_db_did_not_store_fails_and_keeps_its_report(tmp_path, monkeypatch, capsys):
    """[issue 12] ReFrame only warns when it cannot store the session; the nightly fails."""
    calls = fake_reframe(tmp_path, monkeypatch, report_of("s-1"), stored=False,
                         notes={"store_failed": "file is not a database"})
    assert render(nightly.run(targets.of(tmp_path))) == nightly.RC_NOT_STORED
    own = calls[0]["extra"][calls[0]["extra"].index("--report-file") + 1]
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "error" in x]
    assert line.startswith("iostack: error: session s-1 was NOT stored in the results DB "
                           f"{tmp_path}/reframe/results.db (file is not a database)")
    assert f"bin/iostack store-report --site local --system local --root {tmp_path} {own}" in line
    assert own.is_file()


def test_a_failed_run_whose_session_was_not_stored_keeps_the_failure_code(tmp_path, monkeypatch):
    fake_reframe(tmp_path, monkeypatch, report_of(failures=1), rc=1, stored=False)
    assert render(nightly.run(targets.of(tmp_path))) == 1


def test_a_check_that_did_not_load_fails_before_the_run_naming_it(tmp_path, monkeypatch, capsys):
    """[issue 12] a check file that fails to import is only a ReFrame warning."""
    calls = fake_reframe(tmp_path, monkeypatch, report_of(),
                         listed=nightly.MODES["nightly"].checks - {"StackSmokeCheck"})
    with pytest.raises(IostackError) as e:
        render(nightly.run(targets.of(tmp_path)))
    assert e.value.exit_code == 2 and calls == []
    err = str(e.value)
    assert "mode nightly must run StackSmokeCheck, which did not load" in err
    assert "lib/iostack/regression/nightly.py MODES" in err


@pytest.mark.parametrize(("system", "site", "expected"), [
    ("local", "local", "site local has no ReFrame system 'local'"),
    ("nosuch", "local", "ReFrame system 'nosuch' is not one of site local's"),
])
def test_a_missing_system_is_named_with_where_systems_are_defined(tmp_path, monkeypatch, capsys,
                                                                  system, site, expected):
    monkeypatch.setattr(nightly.packages, "missing_on_this_node", lambda purpose: [])
    monkeypatch.setattr(reframe, "list_checks", lambda *a, **k: reframe.Listing(
        1, set(), [], "failed to load configuration: could not find a configuration entry for "
                      f"the requested system: '{system}'"))
    with pytest.raises(IostackError) as e:
        render(nightly.run(targets.of(tmp_path, site=site, system=system)))
    err = str(e.value)
    assert e.value.exit_code == 2 and expected in err
    assert ("reframe-tests/config/local.py defines the systems sites/local.yaml lists (local, "
            "local-cluster, local-slurm); nothing was run") in err


def test_an_unknown_mode_is_named_with_where_modes_are_defined(tmp_path, monkeypatch, capsys):
    calls = fake_reframe(tmp_path, monkeypatch, report_of())
    with pytest.raises(IostackError) as e:
        render(nightly.run(targets.of(tmp_path), mode="nighlty"))
    assert e.value.exit_code == 2 and calls == []
    assert ("unknown mode 'nighlty': modes are deploy, nightly, weekly, defined in "
            "reframe-tests/iostack_rfm/config.py `modes`") in str(e.value)


def test_the_run_gets_its_mode_s_deadline_and_the_lock(tmp_path, monkeypatch):
    calls = fake_reframe(tmp_path, monkeypatch, report_of())
    before = time.monotonic()
    render(nightly.run(targets.of(tmp_path), mode="weekly"))
    (call,) = calls
    bound = nightly.MODES["weekly"].wall_clock_seconds
    assert before + bound <= call["deadline"] <= time.monotonic() + bound
    assert len(call["pass_fds"]) == 1     # ReFrame holds the root's lock while it runs


def test_a_run_out_of_time_fails_saying_so(tmp_path, monkeypatch, capsys):
    fake_reframe(tmp_path, monkeypatch, None, timed_out=True)
    assert render(nightly.run(targets.of(tmp_path))) == nightly.RC_TIME_UP
    assert "mode nightly ran out of its wall-clock bound (4:00:00" in capsys.readouterr().out


def test_a_full_file_system_is_named(tmp_path, monkeypatch, capsys):
    fake_reframe(tmp_path, monkeypatch, None)
    monkeypatch.setattr(filesystems, "full", lambda path: "file system /x (/dev/x, xfs) holding "
                        f"{path} is full: 0 KiB free of 40 MiB")
    (tmp_path / "reframe").mkdir()
    monkeypatch.setattr(nightly.roots, "require_writable", lambda root, sub: root / sub)
    assert render(nightly.run(targets.of(tmp_path))) == 1
    out = capsys.readouterr().out
    assert f"iostack: error: file system /x (/dev/x, xfs) holding {tmp_path}/reframe is full" in out


class Clock:
    """runlock's view of time: monotonic() advances only by what sleep() sleeps, so the
    waiting is counted in polls, not in how fast the machine runs them."""
    def __init__(self):
        self.now, self.slept = 1000.0, []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


def test_a_second_run_waits_for_the_lock_then_names_its_holder(tmp_path, monkeypatch, capsys):
    lock = tmp_path / "nightly.lock"
    clock = Clock()
    monkeypatch.setattr(runlock, "time", clock)
    with runlock.hold(lock, clock.monotonic() + 5):
        assert "since" in lock.read_text() and f"pid {os.getpid()}" in lock.read_text()
        with pytest.raises(Failed) as e:
            with runlock.hold(lock, clock.monotonic() + 5):
                pass
    # it polled every POLL seconds, the last poll cut to the deadline, then gave up
    assert clock.slept == [runlock.POLL, runlock.POLL, 5 - 2 * runlock.POLL]
    assert e.value.exit_code == 1
    out = capsys.readouterr().out
    assert f"iostack: waiting for the run holding {lock}: pid {os.getpid()} on " in out
    assert "and this run's time is up; nothing was run" in str(e.value)
    with runlock.hold(lock, clock.monotonic()):      # released: taken at once, no wait
        pass


def test_deploy_s_regression_needs_only_what_set_up_installs_for_deploying(monkeypatch):
    """README's two commands: `setup` (the `deploy` packages) then `deploy` (mode deploy)
    run; the nightly's modes ask for `setup --with nightly`."""
    missing = {"deploy": [], "nightly": ["openfoam", "slurm-wlm"]}
    monkeypatch.setattr(nightly.packages, "missing_on_this_node", lambda purpose: missing[purpose])
    nightly.require_node_packages("deploy")
    with pytest.raises(IostackError) as e:
        nightly.require_node_packages("nightly")
    assert str(e.value).startswith("mode nightly's checks run openfoam, slurm-wlm, which this "
                                   "node lacks: `bin/iostack setup --with nightly` installs them")
    nightly.require_node_packages("weekly", ["-n", "FdbBitIdentityCheck"])   # selected: runs
    from iostack import cli

    assert cli.parser().parse_args(["deploy"]).mode == "deploy"
    # what mode deploy runs is correctness only: no check of it is tagged performance
    assert not nightly.MODES["deploy"].checks & {"FdbThroughputCheck", "IorLayoutCheck",
                                                 "IO500Check", "MdtestScalingCheck"}


def test_an_unknown_reframe_is_refused_before_it_runs(tmp_path, monkeypatch):
    """The few lines of ReFrame's output iostack reads (a check file that did not load, an
    error's wording) are read only from the release they were checked with."""
    monkeypatch.setattr(reframe, "version", lambda exe: "5.0.0")
    with pytest.raises(IostackError) as e:
        reframe.list_checks(targets.of(tmp_path), "nightly")
    assert str(e.value).startswith("ReFrame 5.0.0 at ") and "KNOWN_REFRAME" in str(e.value)
    monkeypatch.setattr(reframe, "version", lambda exe: "4.10.4")
    reframe.require_known_version(targets.settings())


def test_a_site_that_requires_an_account_and_has_none_is_refused_before_reframe(
        tmp_path, monkeypatch, capsys):
    """ARCHER2 refuses every job without --account [ARCHER2-Scheduler]: with none in the
    facts and none given, `bin/iostack nightly` says so in one line and ReFrame never starts;
    given one, ReFrame's configuration gets it (IOSTACK_ACCOUNT)."""
    from iostack import cli
    from iostack.site import facts as site_facts

    calls = fake_reframe(tmp_path, monkeypatch, real_report([PASS]))
    cray = site_facts.load("cray-ex")
    nameless = dataclasses.replace(cray, account={**cray.account, "name": None})
    monkeypatch.setattr(site_facts, "load", lambda site: nameless)
    assert cli.main(["nightly", "--site", "cray-ex", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("iostack: error: site cray-ex: its "
                                                   "scheduler refuses every job without an account")
    assert calls == []
    monkeypatch.setattr(nightly, "preflight", lambda *a: None)
    render(nightly.run(targets.of(tmp_path, site="cray-ex", account="t01")))
    assert [c["env"] for c in calls] == [{"IOSTACK_ACCOUNT": "t01"}]


def gate_case(node, reason=None):
    """A test case of NodeHardwareCheck spread over the nodes (--distribute=all)."""
    tc = dict(real_report(PASS)["runs"][0]["testcases"][0])
    tc.update(name=f"NodeHardwareCheck_{node}", unique_name=f"NodeHardwareCheck_{node}",
              display_name=f"NodeHardwareCheck %.nid={node} /0123abcd", result="pass",
              fail_reason=None, perfvalues={})
    if reason:
        tc.update(result="fail", fail_reason=f"sanity error: {reason!r}")
    return tc


def test_the_health_gate_drains_a_drifted_node_from_the_performance_checks_only(
        tmp_path, monkeypatch, capsys):
    """Where the system has nodes the hardware check knows, it runs on every node first; a
    node not as its facts say is named in one line and its name reaches the run's checks
    (IOSTACK_DRAINED_NODES: performance checks --exclude it, iostack_rfm.base); the check does
    not run again, and the gate's failure is the run's."""
    gate = real_report(PASS, uuid="gate")
    gate["runs"][0]["testcases"] = [
        gate_case("node1"),
        gate_case("node2", ["node2: /mnt/localdisk is mounted without noatime (options "
                            "rw,relatime), inventory says defaults,noatime",
                            "node2: 2 MB huge pages: inventory says 0, node has 64"])]
    gate["session_info"].update(num_cases=2, num_failures=1)
    main = real_report(PASS, uuid="main")
    calls = []

    def run(target, extra=(), mode=None, env_extra=None, deadline=None, pass_fds=()):
        extra = list(extra)
        calls.append({"extra": extra, "env": env_extra})
        report = gate if "--distribute=all" in extra else main
        path = extra[extra.index("--report-file") + 1]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report))
        return reframe.Outcome(1 if report is gate else 0, {}, False)

    def list_checks(target, mode=None, env_extra=None, select=(), partitions=False):
        return reframe.Listing(0, {nightly.GATE_CHECK} if partitions
                               else set(nightly.MODES[mode].checks), [], "")

    monkeypatch.setattr(reframe, "reframe", run)
    monkeypatch.setattr(reframe, "list_checks", list_checks)
    monkeypatch.setattr(reframe, "load_warnings", lambda target, mode=None, env_extra=None: [])
    monkeypatch.setattr(nightly.results, "is_stored", lambda target, uuid: True)
    monkeypatch.setattr(nightly.packages, "missing_on_this_node", lambda purpose: [])
    monkeypatch.setattr(nightly.provenance, "git_commit", lambda: "c0ffee" * 6 + "c0ff")
    assert render(nightly.run(targets.of(tmp_path, system="local-cluster"), ["-n", "PitzDaily"])) == 1
    out = capsys.readouterr().out
    assert ("iostack: node2 is drained from the performance checks: /mnt/localdisk is mounted "
            "without noatime (options rw,relatime), inventory says defaults,noatime; 2 MB huge "
            "pages: inventory says 0, node has 64\n") in out
    assert "node1 is drained" not in out
    gate_call, main_call = calls
    assert gate_call["extra"][-3:] == ["-n", nightly.GATE_CHECK, "--distribute=all"]
    assert main_call["extra"][-4:] == ["-n", "PitzDaily", "-x", nightly.GATE_CHECK]
    assert main_call["env"][nightly.DRAINED_ENV] == "node2"
    assert nightly.DRAINED_ENV not in gate_call["env"]


def test_a_run_of_the_hardware_check_itself_or_a_system_without_nodes_is_not_gated(
        tmp_path, monkeypatch):
    assert not nightly.gate_wanted(["-n", "NodeHardwareCheck", "--distribute=all"])
    assert nightly.gate_wanted(["-n", "PitzDaily"]) and nightly.gate_wanted([])
    calls = fake_reframe(tmp_path, monkeypatch, real_report(PASS))
    assert render(nightly.run(targets.of(tmp_path))) == 0
    assert len(calls) == 1 and nightly.GATE_CHECK not in calls[0]["extra"]


def test_the_gate_and_the_checks_name_drained_nodes_the_same_way():
    from iostack_rfm import context
    assert context.DRAINED_ENV == nightly.DRAINED_ENV
