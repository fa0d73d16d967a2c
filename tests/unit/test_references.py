"""Performance references in YAML: the committed files are sound, a partition without a
baseline gets a reference no value meets, and record-baseline writes values with their
provenance."""
import math

import pytest
import yaml
from reframe_reports import SERIES, real_report, series

from iostack.core import paths
from iostack.core.errors import Failed
from iostack.regression import baseline, references

REFS = references.REFERENCES_DIR
#: the node that recorded local's committed timing references (this project's dev VM since its
#: reset of 2026-12-02: tests/data/baselines/)
DEV_NODE = "vm-cf926a47"
CHECKS = paths.REFRAME_DIR / "checks"


def committed_files():
    return sorted(REFS.glob("*.yaml"))


def test_there_are_reference_files():
    assert (REFS / "fdb_throughput.yaml") in committed_files()


@pytest.mark.parametrize("path", committed_files(), ids=lambda p: p.name)
def test_committed_references_are_sound(path):
    data = references.load(path)
    assert references.validate(data) == []
    # each file belongs to a check module, and names classes that module defines
    check = CHECKS / (path.stem + ".py")
    assert check.is_file(), f"{path.name} has no check {check.name}"
    for cls in data:
        assert f"class {cls}(" in check.read_text()


def committed_entries(path):
    """(check, partition, variant, variable, entry) of every value in a references file."""
    for cls, section in references.load(path).items():
        for partition, variants in (section.get("references") or {}).items():
            for variant, entries in variants.items():
                for var, e in entries.items():
                    yield cls, partition, variant, var, e


@pytest.mark.parametrize("path", committed_files(), ids=lambda p: p.name)
def test_every_committed_number_says_where_it_comes_from(path):
    for *where, e in committed_entries(path):
        prov = e["provenance"]
        if isinstance(prov, dict) and "recorded" in prov:
            assert {"commit", "spack_lock_sha256", "session"} <= set(prov), where
        else:  # a number from a document, which REFERENCES.md names
            assert prov["source"].startswith("["), where


@pytest.mark.parametrize("path", committed_files(), ids=lambda p: p.name)
def test_every_recorded_number_names_code_one_can_check_out(path):
    """A number recorded from nights names the commit they ran (one per night when they
    differ); a `-dirty` one ran on uncommitted changes that no checkout holds."""
    dirty = []
    for *where, e in committed_entries(path):
        prov = e["provenance"]
        named = [prov.get("commit", ""), *prov.get("commits", [])] if isinstance(prov, dict) else []
        if any(str(c).endswith("-dirty") for c in named):
            dirty.append(" ".join(where))
    assert dirty[:3] == [], f"{len(dirty)} values name a -dirty commit"


#: the nightly's variants of the timed FDB and NetCDF checks on the local systems
NIGHTLY_VARIANTS = {
    ("fdb_throughput.yaml", "FdbThroughputCheck"): [
        {"size": "small", "durability": d, "path": p, "buffer_mib": 64}
        for d, p in (("sync-flush", "message"), ("sync-end", "message"),
                     ("async-end", "message"), ("sync-flush", "key"))],
    ("fdb_throughput.yaml", "FdbWriterScalingCheck"): [
        {"size": "small", "durability": "sync-flush"}],
    ("netcdf_output.yaml", "NetcdfOutputCheck"): [
        {"size": "small", "library": lib} for lib in ("netcdf", "pnetcdf")],
}


@pytest.mark.parametrize("file,check", list(NIGHTLY_VARIANTS))
def test_local_has_baselines_for_the_nightly_timed_variants_of_the_release(file, check):
    """`local`'s nightly times the release's programs (environment `stack`); Debian's
    (`builtin`) have no baseline there, so the release's numbers never judge them."""
    section = references.load(REFS / file)[check]
    for params in NIGHTLY_VARIANTS[(file, check)]:
        variant = references.variant_key(params)
        assert references.has_baseline(section, "local:default", variant, "stack",
                                       DEV_NODE), variant
        assert not references.has_baseline(section, "local:default", variant, "builtin",
                                           DEV_NODE), variant
        # another node of local has none of its own: those numbers are the dev VM's
        assert not references.has_baseline(section, "local:default", variant, "stack",
                                           "other-node"), variant


SECTION = {
    "thresholds": {"ratio": {"lower": -0.5, "upper": None, "unit": "ratio"},
                   "bw": {"lower": None, "upper": None, "unit": "MiB/s"}},
    "references": {
        "sys:part": {
            "*": {"ratio": {"value": 0.8, "lower": -0.5, "upper": None, "unit": "ratio",
                            "provenance": {"source": "test"}}},
            "a=1": {"ratio": {"value": 0.6, "lower": -0.2, "upper": 0.1, "unit": "ratio",
                              "provenance": {"source": "test"}}},
        },
    },
}


def test_a_recorded_partition_gets_its_numbers_and_a_variant_its_own():
    assert references.reference_dict(SECTION, "a=2", "env")["sys:part"] == {
        "ratio": (0.8, -0.5, None, "ratio")}
    assert references.reference_dict(SECTION, "a=1", "env")["sys:part"] == {
        "ratio": (0.6, -0.2, 0.1, "ratio")}
    assert references.has_baseline(SECTION, "sys:part", "a=2", "env")
    assert not references.has_baseline(SECTION, "other:part", "a=2", "env")


def entry(value):
    return {"value": value, "lower": -0.1, "upper": None, "unit": "ratio",
            "provenance": {"recorded": "2026-11-26T03:00:00Z", "commit": "c",
                           "spack_lock_sha256": "ab", "session": "s"}}


def test_a_value_judges_only_the_environment_it_was_measured_in():
    section = {"thresholds": SECTION["thresholds"],
               "references": {"sys:part+stack@n1": {"a=1": {"ratio": entry(0.9)}},
                              "sys:part+builtin@n1": {"*": {"ratio": entry(0.4)}}}}
    assert references.reference_dict(section, "a=1", "stack", "n1")["sys:part"] == {
        "ratio": (0.9, -0.1, None, "ratio")}
    assert references.reference_dict(section, "a=1", "builtin", "n1")["sys:part"] == {
        "ratio": (0.4, -0.1, None, "ratio")}
    # an environment without its own gets no partition entry: ReFrame falls to '*'
    assert "sys:part" not in references.reference_dict(section, "a=1", "gnu", "n1")
    assert not references.has_baseline(section, "sys:part", "a=1", "gnu", "n1")
    # a document's figure (no environment) holds for all; an environment's own overrides it
    section["references"]["sys:part"] = {"*": {"ratio": {**entry(0.7), "provenance": {
        "source": "[OIFS-HECToR] Table 2"}}}}
    assert references.reference_dict(section, "a=1", "gnu", "n1")["sys:part"]["ratio"][0] == 0.7
    assert references.reference_dict(section, "a=1", "stack", "n1")["sys:part"]["ratio"][0] == 0.9
    assert references.validate({"C": section}) == []


def test_a_measured_value_must_name_its_environment():
    (error,) = references.validate({"C": {"references": {"sys:part@n1": {"*": {
        "ratio": entry(0.9)}}}}})
    assert "must name the environment" in error
    (error,) = references.validate({"C": {"references": {"sys:part+env": {"*": {
        "ratio": entry(0.9)}}}}})
    assert "must name the node it ran on" in error
    (error,) = references.validate({"C": {"references": {"sys:part+a+b@n1": {"*": {
        "ratio": entry(0.9)}}}}})
    assert "system:partition, optionally +environment and @node" in error


def test_an_unknown_partition_gets_a_reference_nothing_meets():
    ref = references.reference_dict(SECTION, "a=1", "env")["*"]
    # only the gated variable: informational ones never fail
    assert set(ref) == {"ratio"}
    value, lower, upper, unit = ref["ratio"]
    assert references.is_no_baseline(value) and math.isfinite(value)
    assert lower == 0 and upper is None and unit == "ratio"
    # ReFrame's bound: value * (1 + lower) — no measured ratio reaches it
    assert value * (1 + lower) > 1e300


def test_variant_keys_are_sorted_parameters():
    assert references.variant_key({"b": True, "a": 64}) == "a=64,b=True"
    assert references.variant_key({}) == "*"


def test_validate_finds_missing_provenance_and_bad_thresholds():
    bad = {"C": {"references": {"nosep": {"*": {"v": {"value": float("nan"), "lower": -2}}}}}}
    errors = "\n".join(references.validate(bad))
    assert "system:partition" in errors and "finite" in errors and "provenance" in errors


def test_a_figure_must_cite_a_document_of_references_md():
    assert {"OIFS-HECToR", "POP-GBmolDD", "INMCM-NetCDF", "OCI-OpenFOAM",
            "IO500-OFP"} <= references.citation_keys()
    entry = {"value": 1.0, "lower": None, "upper": None, "unit": "s"}
    cited = {"C": {"references": {"s:p": {"*": {"v": {**entry, "provenance": {
        "source": "[OIFS-HECToR] Table 2"}}}}}}}
    assert references.validate(cited) == []
    for source in ("[NO-SUCH-DOC] Table 1", "seed 000, Table 2"):
        cited["C"]["references"]["s:p"]["*"]["v"]["provenance"]["source"] = source
        (error,) = references.validate(cited)
        assert "cites no key of REFERENCES.md" in error
    expectation = {"C": {"expectations": [{"what": "x", "provenance": {"source": "seed 3"}}]}}
    assert references.validate(expectation)


def test_dump_keeps_the_header_comment(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("# header line\n# second\nC: {}\n")
    references.dump(path, {"C": {"references": {}}})
    text = path.read_text()
    assert text.startswith("# header line\n# second\n")
    assert yaml.safe_load(text) == {"C": {"references": {}}}


# hand-built sessions for the gate's refusal and band rules
def session(uuid, t, ratio, result="fail", fail_phase="performance", system="sys"):
    return {
        "session_info": {"uuid": uuid, "time_start_unix": t, "time_end_unix": t + 60,
                         "hostname": "node1", "commit": f"c{uuid}", "spack_lock_sha256": "ab" * 32},
        "runs": [{"testcases": [{
            "name": "ThroughputCheck %a=1", "system": system, "partition": "part",
            "environ": "env", "filename": "/x/checks/through.py", "result": result,
            "fail_phase": fail_phase, "reference_variant": "a=1", "node_key": "node1",
            "node_identity": {"host": "node1"},
            "perfvalues": {f"{system}:part:ratio": [ratio, 1.7e308, 0, None, "ratio", "fail"],
                           f"{system}:part:bw": [100.0 * ratio, 0, None, None, "MiB/s", "pass"]},
        }]}],
    }




@pytest.fixture
def refs_dir(tmp_path):
    """References for the checks of the kept run reports, in files named after their
    modules (report_checks.py, tiny_checks.py): thresholds, no values yet."""
    gated = {"lower": -0.5, "upper": None, "unit": "ratio"}
    sections = {check: {"thresholds": {"fdb_write_ratio": gated,
                                       "fdb_write_bw": {"lower": None, "upper": None,
                                                        "unit": "MiB/s"}},
                        "references": {}}
                for check in ("TinyThroughputCheck", "TinyNewSystemCheck")}
    (tmp_path / "report_checks.yaml").write_text("# kept\n" + yaml.safe_dump(sections))
    (tmp_path / "tiny_checks.yaml").write_text(yaml.safe_dump(
        {check: {"thresholds": {"ratio": gated}} for check in ("TinyPassCheck", "TinySanityFailCheck")}))
    return tmp_path


#: the node the kept reports ran on (whichever regenerated them)
KEPT_NODE = next(iter(series()[0]["runs"][0]["testcases"]))["node_key"]


def recorded(refs_dir, check, var, file="report_checks.yaml"):
    # the kept reports ran in Debian's environment, on KEPT_NODE
    return references.load(refs_dir / file)[check]["references"][
        f"local:default+builtin@{KEPT_NODE}"]["size=small"][var]


def test_record_baseline_writes_values_with_provenance(refs_dir):
    """From a real session on a system without a baseline (TinyNewSystemCheck fails on the
    reference no value meets): its values, filed under the variant ReFrame reported."""
    night = series()[0]
    bw, ratio, (release, commit, lock) = SERIES[0]
    written = baseline.record([night], "local", ["TinyNewSystemCheck"], refs_dir=refs_dir)
    assert written == {refs_dir / "report_checks.yaml": 2}
    entry = recorded(refs_dir, "TinyNewSystemCheck", "fdb_write_ratio")
    assert (entry["value"], entry["lower"], entry["upper"], entry["unit"]) == (ratio, -0.5, None, "ratio")
    info = night["session_info"]
    assert entry["provenance"] == {
        "recorded": baseline._utc(info["time_end_unix"]), "commit": commit,
        "spack_lock_sha256": lock, "session": info["uuid"], "host": info["hostname"],
        # the identity of the node its job ran on, as the job recorded it
        "node": night["runs"][0]["testcases"][0]["node_identity"]}
    assert entry["provenance"]["node"]["host"]
    informational = recorded(refs_dir, "TinyNewSystemCheck", "fdb_write_bw")
    assert (informational["value"], informational["lower"]) == (bw, None)
    assert (refs_dir / "report_checks.yaml").read_text().startswith("# kept\n")
    # and the check now has a baseline there, which it had not when it ran
    data = references.load(refs_dir / "report_checks.yaml")
    assert references.has_baseline(data["TinyNewSystemCheck"], "local:default", "size=small",
                                   "builtin", KEPT_NODE)
    assert "TinyThroughputCheck" not in data["TinyNewSystemCheck"]["references"]


def test_record_baseline_takes_the_median_of_several_sessions_and_a_tolerance(refs_dir):
    nights = series()[:3]           # the nights within their bands
    chosen = baseline.choose_sessions(nights, "local", count=3)
    assert chosen == nights
    baseline.record(chosen, "local", ["TinyThroughputCheck"], refs_dir=refs_dir, lower=0.25)
    entry = recorded(refs_dir, "TinyThroughputCheck", "fdb_write_ratio")
    assert entry["value"] == sorted(ratio for _, ratio, _ in SERIES[:3])[1]
    assert entry["lower"] == -0.25
    assert entry["provenance"]["median_of_sessions"] == [n["session_info"]["uuid"] for n in nights]
    assert entry["provenance"]["commits"] == sorted({commit for _, _, (_, commit, _) in SERIES[:3]})
    # --lower is for the gated variables: the informational one keeps its open band
    assert recorded(refs_dir, "TinyThroughputCheck", "fdb_write_bw")["lower"] is None


def test_record_baseline_ignores_cases_whose_sanity_failed_and_other_systems(refs_dir, capsys):
    tiny = real_report()
    assert baseline.record([tiny], "local", ["TinySanityFailCheck"], refs_dir=refs_dir) == {}
    # a check without iostack's mixin names no node: nothing to key its values by
    assert baseline.record([tiny], "local", ["TinyPassCheck"], refs_dir=refs_dir) == {}
    assert "TinyPassCheck: its results name no node" in capsys.readouterr().out
    assert baseline.record(series(), "local-slurm", refs_dir=refs_dir) == {}
    with pytest.raises(Failed, match="no stored session has performance values from system nowhere"):
        baseline.choose_sessions(series(), "nowhere")


def with_case(s, name, result, fail_phase=None, perfvalues=None):
    s["runs"][0]["testcases"].append({
        "name": name, "system": "sys", "partition": "part", "environ": "env",
        "filename": "/x/checks/other.py", "result": result, "fail_phase": fail_phase,
        "node_key": "node1", "perfvalues": perfvalues or {}})
    return s


@pytest.mark.parametrize("phase,perfvalues", [
    ("sanity", None),                        # e.g. a wrong byte count
    ("run", None),
    # a real reference missed, not the no-baseline placeholder
    ("performance", {"sys:part:bw": [50.0, 100.0, -0.1, None, "MiB/s", "fail"]}),
])
def test_record_baseline_refuses_a_session_that_failed_anything(refs_dir, phase, perfvalues):
    failed = with_case(session("9", 1.7e9, 0.5), "OtherCheck", "fail", phase, perfvalues)
    with pytest.raises(Failed) as refused:
        baseline.choose_sessions([session("8", 1.6e9, 0.5), failed], "sys", count=2)
    assert str(refused.value).startswith(
        f"session 9 failed on sys, so none of its values is a baseline: OtherCheck "
        f"@sys:part+env: {phase}")
    # the passing one alone, named, is fine
    assert baseline.choose_sessions([session("8", 1.6e9, 0.5), failed], "sys", uuids=["8"])


def test_record_baseline_takes_the_sessions_it_is_named_and_counts_only_the_checks_asked_for():
    # a sensitivity campaign's DB: each night's figures are sessions of their own, and slowed
    # nights (failed on performance by design) sit between the clean ones
    def other(uuid, t):
        s = with_case(session(uuid, t, 0.5), "OtherCheck", "pass",
                      perfvalues={"sys:part:iops": [10.0, 0, None, None, "ops/s", "pass"]})
        s["runs"][0]["testcases"].pop(0)
        return s
    clean = [session("c1", 1.0e9, 0.5, "pass", None), session("c2", 1.2e9, 0.6, "pass", None)]
    slow = session("slow", 1.15e9, 0.2)
    slow["runs"][0]["testcases"][0]["perfvalues"]["sys:part:ratio"] = \
        [0.2, 0.5, -0.1, None, "ratio", "fail"]
    stored = [clean[0], other("o1", 1.1e9), slow, clean[1],
              other("o2", 1.3e9)]
    assert baseline.choose_sessions(stored, "sys", uuids=["c2", "c1"]) == clean
    with pytest.raises(Failed, match="^no stored session nope$"):
        baseline.choose_sessions(stored, "sys", uuids=["c1", "nope"])
    # the last 2 with ThroughputCheck's values: one of them is the slowed night, refused
    with pytest.raises(Failed, match="^session slow failed on sys"):
        baseline.choose_sessions(stored, "sys", count=2, checks=["ThroughputCheck"])
    assert baseline.choose_sessions(stored, "sys", count=1, checks=["ThroughputCheck"]) == \
        [clean[1]]


def test_each_value_names_only_the_sessions_it_is_the_median_of(refs_dir):
    (refs_dir / "through.yaml").write_text(
        "ThroughputCheck:\n  thresholds:\n"
        "    ratio: {lower: -0.05, upper: null, unit: ratio}\n  references: {}\n")
    (refs_dir / "other.yaml").write_text(
        "OtherCheck:\n  thresholds:\n"
        "    iops: {lower: null, upper: null, unit: ops/s}\n  references: {}\n")
    clean = [session(f"c{i}", 1.0e9 + i, 0.5 + i / 100, "pass", None) for i in range(3)]
    other = with_case(session("o1", 1.1e9, 0.5), "OtherCheck", "pass",
                      perfvalues={"sys:part:iops": [10.0, 0, None, None, "ops/s", "pass"]})
    other["runs"][0]["testcases"].pop(0)
    baseline.record(clean + [other], "sys", refs_dir=refs_dir)
    ratio = references.load(refs_dir / "through.yaml")["ThroughputCheck"]["references"][
        "sys:part+env@node1"]["a=1"]["ratio"]
    assert ratio["provenance"]["median_of_sessions"] == ["c0", "c1", "c2"]
    iops = references.load(refs_dir / "other.yaml")["OtherCheck"]["references"][
        "sys:part+env@node1"]["*"]["iops"]
    assert iops["provenance"]["session"] == "o1" and "median_of_sessions" not in iops["provenance"]


def test_the_band_comes_from_the_nights_spread(refs_dir):
    (refs_dir / "through.yaml").write_text(
        "ThroughputCheck:\n  thresholds:\n"
        "    ratio: {lower: -0.02, upper: null, unit: ratio}\n  references: {}\n")
    ratios = [1.0, 1.02, 0.98, 1.01, 0.99]
    sessions = [session(str(i), 1.7e9 + i, r) for i, r in enumerate(ratios)]
    baseline.record(baseline.choose_sessions(sessions, "sys", count=5), "sys", refs_dir=refs_dir)
    entry = references.load(refs_dir / "through.yaml")["ThroughputCheck"]["references"][
        "sys:part+env@node1"]["a=1"]["ratio"]
    # median 1.0, MAD 0.01: 2.5 robust standard deviations
    assert entry["value"] == 1.0
    assert entry["lower"] == pytest.approx(-2.5 * 1.4826 * 0.01)
    assert entry["spread"] == {"nights": 5, "nights_spread": round(1.4826 * 0.01, 6),
                               "within_run_spread": None, "band_from": "nights"}


def test_one_night_takes_its_band_from_the_within_run_spread(refs_dir):
    (refs_dir / "through.yaml").write_text(
        "ThroughputCheck:\n  thresholds:\n"
        "    ratio: {lower: -0.02, upper: null, unit: ratio}\n"
        "    ratio_spread: {lower: null, upper: null, unit: fraction}\n  references: {}\n")
    s = session("1", 1.7e9, 0.5)
    s["runs"][0]["testcases"][0]["perfvalues"]["sys:part:ratio_spread"] = [
        0.17, 0, None, None, "fraction", "pass"]
    baseline.record([s], "sys", refs_dir=refs_dir)
    entry = references.load(refs_dir / "through.yaml")["ThroughputCheck"]["references"][
        "sys:part+env@node1"]["a=1"]["ratio"]
    # range of 3 repeats / 1.7 = one repeat's sigma, x2 for the nights, x2.5
    assert entry["lower"] == pytest.approx(-2.5 * 2 * 0.17 / 1.7)
    assert entry["spread"]["band_from"] == "within-run"


def test_a_correctness_figure_cannot_be_gated():
    data = {"C": {"thresholds": {"bytes_written": {"lower": 0, "upper": 0, "unit": "B"},
                                 "iterations_serial": {"lower": 0, "upper": 0,
                                                       "unit": "iterations"},
                                 "fields": {"lower": None, "upper": None, "unit": "fields"}}}}
    errors = references.validate(data)
    assert len(errors) == 2
    assert all("correctness figure" in e for e in errors)


def _ran_at(report, freq):
    for attempt in report["runs"]:
        for tc in attempt["testcases"]:
            tc["cpu_freq_requested"] = freq
    return report


def test_a_recorded_value_keeps_the_cpu_frequency_its_job_ran_at(refs_dir):
    """[ARCHER2-Energy]: the same code runs slower at ARCHER2's 2.0 GHz default cap than at
    2.25 GHz: each recorded value says which it was taken at (the checks then ask for it),
    and values of different frequencies are never one median."""
    nights = [_ran_at(n, "2250000") for n in series()[:2]]
    baseline.record(nights, "local", ["TinyThroughputCheck"], refs_dir=refs_dir)
    assert recorded(refs_dir, "TinyThroughputCheck", "fdb_write_ratio")["provenance"][
        "cpu_freq_khz"] == 2250000
    mixed = [_ran_at(series()[0], "2250000"), _ran_at(series()[1], "")]
    with pytest.raises(Failed, match=r"ran at different CPU frequencies \(2250000, default\)"):
        baseline.record(mixed, "local", ["TinyThroughputCheck"], refs_dir=refs_dir)
    # a run without a frequency (a node that sets none) records none
    baseline.record(series()[:1], "local", ["TinyNewSystemCheck"], refs_dir=refs_dir)
    assert "cpu_freq_khz" not in recorded(refs_dir, "TinyNewSystemCheck",
                                          "fdb_write_ratio")["provenance"]
    data = references.load(refs_dir / "report_checks.yaml")
    data["TinyThroughputCheck"]["references"][f"local:default+builtin@{KEPT_NODE}"][
        "size=small"]["fdb_write_ratio"]["provenance"]["cpu_freq_khz"] = "2.25 GHz"
    assert any("cpu_freq_khz '2.25 GHz' is not a frequency in kHz" in e
               for e in references.validate(data))
