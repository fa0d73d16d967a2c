"""Figures judged on the node that made them (reframe-tests/README.md, "Gates"): node A's
absolute figures never judge node B; on B only the figures that transfer (ratios measured
in one run) are judged, and the nightly says in one line that B needs record-baseline; once
B's own baseline is recorded, its absolute figures are judged by it. record-baseline
refuses sessions that ran on uncommitted code. Gate 1's time alarms need the next night's
confirmation, and gate 3 judges a night's figures as one family (Holm)."""
import types

import pytest
import yaml

from iostack.core.errors import Failed
from iostack.regression import baseline, gates, nightly, node, references

THRESHOLDS = {"ratio": {"lower": -0.1, "upper": None, "unit": "ratio", "transfers": True},
              "bw": {"lower": -0.1, "upper": None, "unit": "MiB/s"}}


def night(uuid, t, bw, ratio, node_key, commit="c1", results=("pass", "pass"), ref=None):
    """A stored session of ThroughputCheck on sys:part+env, run on `node_key`."""
    bw_ref, ratio_ref = ref or (0, 0)
    return {
        "session_info": {"uuid": uuid, "time_start_unix": t, "time_end_unix": t + 60,
                         "hostname": node_key, "commit": commit, "spack_lock_sha256": "ab"},
        "runs": [{"testcases": [{
            "name": "ThroughputCheck", "system": "sys", "partition": "part", "environ": "env",
            "filename": "/x/checks/through.py", "reference_variant": "*",
            "result": "pass" if set(results) == {"pass"} else "fail",
            "fail_phase": None if set(results) == {"pass"} else "performance",
            "node_key": node_key, "node_identity": {"host": node_key},
            "perfvalues": {"sys:part:bw": [bw, bw_ref, -0.1, None, "MiB/s", results[0]],
                           "sys:part:ratio": [ratio, ratio_ref, -0.1, None, "ratio",
                                              results[1]]}}]}],
    }


@pytest.fixture
def refs(tmp_path):
    (tmp_path / "through.yaml").write_text(yaml.safe_dump(
        {"ThroughputCheck": {"thresholds": THRESHOLDS, "references": {}}}))
    return tmp_path


def section(refs):
    return references.load(refs / "through.yaml")["ThroughputCheck"]


def target(refs):
    return types.SimpleNamespace(reframe_system="sys", site="s",
                                 settings=types.SimpleNamespace(references=refs))


def test_a_node_s_absolute_figures_judge_only_that_node_and_b_s_own_baseline_judges_b(refs):
    baseline.record([night(str(i), 1e9 + i, 1000.0 + i, 0.8, "node-a") for i in range(3)],
                    "sys", refs_dir=refs)
    found = section(refs)
    assert set(found["references"]) == {"sys:part+env@node-a"}
    on_a = references.reference_dict(found, "*", "env", "node-a")["sys:part"]
    assert on_a["bw"][0] == 1001.0 and on_a["ratio"][0] == 0.8
    # on B: A's ratio (it transfers), A's MiB/s not: ReFrame's own "no reference", never
    # the '*' that no value meets (ReFrame would fall back to it)
    on_b = references.reference_dict(found, "*", "env", "node-b")["sys:part"]
    assert on_b["ratio"][0] == 0.8 and on_b["bw"] == (0, None, None, "MiB/s")
    assert not references.has_baseline(found, "sys:part", "*", "env", "node-b")
    assert references.has_baseline(found, "sys:part", "*", "env", "node-a")
    # B records its own: from then on its absolute figures are judged by its own numbers
    baseline.record([night(str(i), 2e9 + i, 300.0 + i, 0.7, "node-b") for i in range(3)],
                    "sys", refs_dir=refs)
    found = section(refs)
    on_b = references.reference_dict(found, "*", "env", "node-b")["sys:part"]
    assert on_b["bw"][0] == 301.0 and on_b["bw"][1] is not None and on_b["ratio"][0] == 0.7
    assert references.reference_dict(found, "*", "env", "node-a")["sys:part"]["bw"][0] == 1001.0
    assert found["references"]["sys:part+env@node-b"]["*"]["bw"]["provenance"]["node"] == {
        "host": "node-b"}
    # a third node gets the latest recorded node's ratio, and still no MiB/s
    on_c = references.reference_dict(found, "*", "env", "node-c")["sys:part"]
    assert on_c["ratio"][0] == 0.7 and on_c["bw"][0] == 0
    assert references.validate({"ThroughputCheck": found}) == []


def test_a_partition_no_node_recorded_still_gets_the_reference_nothing_meets(refs):
    ref = references.reference_dict(section(refs), "*", "env", "node-b")
    assert "sys:part" not in ref and ref["*"]["bw"][0] == references.NO_BASELINE


def test_on_a_node_without_its_baseline_the_nightly_says_so_once_and_judges_ratios_only(
        refs, capsys):
    baseline.record([night(str(i), 1e9 + i, 1000.0, 0.8, "node-a") for i in range(3)],
                    "sys", refs_dir=refs)
    tonight = night("b1", 3e9, 300.0, 0.8, "node-b")
    assert nightly.nodes_without_baseline(tonight, target(refs)) == {"node-b": ["ThroughputCheck"]}
    assert nightly.nodes_without_baseline(night("a9", 3e9, 1000.0, 0.8, "node-a"),
                                          target(refs)) == {}
    # history: B's ratio against B's nights only (A's are another node's), B's MiB/s not at
    # all: twelve nights of B at 300 MiB/s, a third of A's, are no regression of B
    stored = [night(f"a{i}", 1e9 + i, 1000.0, 0.8, "node-a") for i in range(12)] + \
             [night(f"b{i}", 2e9 + i, 300.0 - i % 3, 0.8 + i % 3 / 100, "node-b")
              for i in range(12)]
    assert nightly.history_regressions(stored[-1], target(refs), stored) == []
    # ... but a drop of B's own ratio is
    slow = stored[:-3] + [night(f"s{i}", 3e9 + i, 300.0, 0.5, "node-b") for i in range(3)]
    (line,) = nightly.history_regressions(slow[-1], target(refs), slow)
    assert "ThroughputCheck @sys:part+env ratio:" in line and "Holm" in line


def test_the_one_line_notice_in_the_verdict(refs, monkeypatch, capsys):
    baseline.record([night(str(i), 1e9 + i, 1000.0, 0.8, "node-a") for i in range(3)],
                    "sys", refs_dir=refs)
    tonight = night("b1", 3e9, 300.0, 0.8, "node-b")
    for line in [f"iostack: node {n} has no baseline of its own ({', '.join(c)}): only figures"
                 for n, c in nightly.nodes_without_baseline(tonight, target(refs)).items()]:
        assert line == "iostack: node node-b has no baseline of its own (ThroughputCheck): only figures"


def test_record_baseline_refuses_sessions_that_ran_on_uncommitted_code():
    sessions = [night("1", 1e9, 1000.0, 0.8, "n", commit="abc"),
                night("2", 1e9 + 1, 1000.0, 0.8, "n", commit="abc-dirty")]
    with pytest.raises(Failed) as refused:
        baseline.choose_sessions(sessions, "sys", count=2)
    assert "\n" not in str(refused.value)
    assert str(refused.value).startswith("session(s) 2 ran on uncommitted code")
    assert baseline.choose_sessions(sessions, "sys", uuids=["1"]) == sessions[:1]


def test_the_node_key_is_the_identity_s_or_the_declared_class_or_the_test_s(tmp_path):
    key, ident = node.this_node(tmp_path / "not-yet")
    assert key == node.key_of(ident) and key.startswith(ident["host"].replace(":", "_"))
    assert set(ident) == {"host", "cpu_model", "machine_id", "scratch_device"}
    # a fresh VM of the same kind: same host name and CPU, another machine id
    assert node.key_of({**ident, "machine_id": "0" * 32}) != key
    assert node.this_node(tmp_path, "cray-ex.compute")[0] == "class.cray-ex.compute"
    assert node.this_node(tmp_path, "cray-ex.compute", "other node")[0] == "other_node"
    assert references.validate({"C": {"references": {f"s:p+e@{key}": {}}}}) == []


def test_a_time_alarm_fails_the_nightly_only_when_the_night_before_raised_it_too(refs):
    baseline.record([night(str(i), 1e9 + i, 1000.0, 0.8, "node-a") for i in range(3)],
                    "sys", refs_dir=refs)
    low = dict(results=("fail", "pass"), ref=(1000.0, 0.8))
    tonight = night("t", 3e9, 800.0, 0.8, "node-a", **low)
    inside = [night("y", 2e9, 990.0, 0.8, "node-a", ref=(1000.0, 0.8))]
    (line,), only = nightly.unconfirmed_alarms(tonight, target(refs), inside + [tonight])
    assert only and line.startswith("ThroughputCheck @sys:part+env bw=800 MiB/s outside its band")
    outside = [night("y", 2e9, 850.0, 0.8, "node-a", **low)]
    assert nightly.unconfirmed_alarms(tonight, target(refs), outside + [tonight]) == ([], False)
    # another node's night confirms nothing of this one's
    other = [night("y", 2e9, 850.0, 0.8, "node-b", **low)]
    assert nightly.unconfirmed_alarms(tonight, target(refs), other + [tonight])[1]
    # a failure that is not a band (the no-baseline placeholder) is ReFrame's, as before
    placeholder = night("p", 3e9, 800.0, 0.8, "node-a", results=("fail", "pass"),
                        ref=(references.NO_BASELINE, 0.8))
    assert nightly.unconfirmed_alarms(placeholder, target(refs), inside) == ([], False)


def test_holm_judges_a_night_s_figures_as_one_family():
    assert gates.holm({"a": 0.001, "b": 0.03, "c": 0.5}, alpha=0.05) == {"a"}
    assert gates.holm({"a": 0.01, "b": 0.012}, alpha=0.05) == {"a", "b"}
    # one figure at p = 0.006 (gate 3's own ALPHA would call it) among 25: not a family alarm
    assert gates.holm({"x": 0.006, **{str(i): 0.5 for i in range(24)}}) == set()
    assert gates.confirmed([True, False, True, True, False]) == [False, False, False, True, False]


def test_the_report_shows_each_case_s_node_and_cpu_frequency_policy():
    from reframe_reports import series

    from iostack.regression import report

    (row, *_) = report.latest_rows(series())
    # the kept reports ran on a VM without cpufreq: recorded as absent, not left out
    assert row["node"] and row["cpu"] == "cpufreq absent"
    assert report.cpu_text({"cpu_governor": "performance", "cpu_freq_cur_khz": 2250000,
                            "cpu_freq_max_khz": 2250000, "cpu_freq_requested": "2250000"}) == \
        "governor performance, now 2.25 GHz, cap 2.25 GHz, asked 2250000"


def test_openifs_s_shares_and_speed_judge_only_the_node_that_recorded_them():
    """The committed OpenIFS references: its FDB and GRIB shares did not hold on another VM
    (0.242 and 0.271 against 0.132 +60%, openifs_idealised.yaml's header), so on a new node
    nothing of it is judged, and on the recording node every gated figure is."""
    section = references.load(references.REFERENCES_DIR / "openifs_idealised.yaml")[
        "OpenifsIdealisedCheck"]
    variant = "case=hs_tl159l31,output=fdb"
    gated = {"days_per_day", "fdb_share", "grib_share"}
    assert gated <= set(references.gated_variables(section))
    for recorded in {references.node_of(k) for k in section["references"]}:
        on_it = references.reference_dict(section, variant, "stack", recorded)["local:default"]
        assert {v for v in gated if on_it[v][0] > 0} == gated, recorded
    new = references.reference_dict(section, variant, "stack", "vm-5059a074")["local:default"]
    assert {v: new[v] for v in gated} == {
        v: (0, None, None, section["thresholds"][v]["unit"]) for v in gated}
    assert not references.has_baseline(section, "local:default", variant, "stack",
                                       "vm-5059a074")
