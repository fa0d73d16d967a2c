"""Performance references in YAML: the committed files are sound, a partition without a
baseline gets a reference no value meets, and record-baseline writes values with their
provenance."""
import math

import pytest
import yaml

from iostack.core import paths
from iostack.core.errors import Failed
from iostack.regression import baseline, references

REFS = references.REFERENCES_DIR
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


@pytest.mark.parametrize("path", committed_files(), ids=lambda p: p.name)
def test_every_committed_number_says_where_it_comes_from(path):
    for cls, section in references.load(path).items():
        for partition, variants in (section.get("references") or {}).items():
            for variant, entries in variants.items():
                for var, e in entries.items():
                    prov = e["provenance"]
                    if isinstance(prov, dict) and "recorded" in prov:
                        assert {"commit", "spack_lock_sha256", "session"} <= set(prov), (
                            cls, partition, variant, var)
                    else:  # a number from a document, which REFERENCES.md names
                        assert prov["source"].startswith("["), (cls, partition, variant, var)


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
def test_the_local_systems_have_baselines_for_the_nightly_timed_variants(file, check):
    section = references.load(REFS / file)[check]
    for partition in ("local:default", "local-slurm:default"):
        for params in NIGHTLY_VARIANTS[(file, check)]:
            variant = references.variant_key(params)
            assert references.has_baseline(section, partition, variant), (partition, variant)


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
    assert references.reference_dict(SECTION, "a=2")["sys:part"] == {
        "ratio": (0.8, -0.5, None, "ratio")}
    assert references.reference_dict(SECTION, "a=1")["sys:part"] == {
        "ratio": (0.6, -0.2, 0.1, "ratio")}
    assert references.has_baseline(SECTION, "sys:part", "a=2")
    assert not references.has_baseline(SECTION, "other:part", "a=2")


def test_an_unknown_partition_gets_a_reference_nothing_meets():
    ref = references.reference_dict(SECTION, "a=1")["*"]
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


def session(uuid, t, ratio, result="fail", fail_phase="performance", system="sys"):
    return {
        "session_info": {"uuid": uuid, "time_start_unix": t, "time_end_unix": t + 60,
                         "hostname": "node1", "commit": f"c{uuid}", "spack_lock_sha256": "ab" * 32},
        "runs": [{"testcases": [{
            "name": "ThroughputCheck %a=1", "system": system, "partition": "part",
            "environ": "env", "filename": "/x/checks/through.py", "result": result,
            "fail_phase": fail_phase, "reference_variant": "a=1",
            "perfvalues": {f"{system}:part:ratio": [ratio, 1.7e308, 0, None, "ratio", "fail"],
                           f"{system}:part:bw": [100.0 * ratio, 0, None, None, "MiB/s", "pass"]},
        }]}],
    }


@pytest.fixture
def refs_dir(tmp_path):
    (tmp_path / "through.yaml").write_text(
        "# kept\nThroughputCheck:\n  thresholds:\n"
        "    ratio: {lower: -0.5, upper: null, unit: ratio}\n"
        "    bw: {lower: null, upper: null, unit: MiB/s}\n  references: {}\n")
    return tmp_path


def test_record_baseline_writes_values_with_provenance(refs_dir):
    written = baseline.record([session("1", 1.7e9, 0.5)], "sys", refs_dir=refs_dir)
    assert written == {refs_dir / "through.yaml": 2}
    data = references.load(refs_dir / "through.yaml")
    entry = data["ThroughputCheck"]["references"]["sys:part"]["a=1"]["ratio"]
    assert entry["value"] == 0.5 and entry["lower"] == -0.5 and entry["unit"] == "ratio"
    assert entry["provenance"]["commit"] == "c1"
    assert entry["provenance"]["session"] == "1"
    assert entry["provenance"]["spack_lock_sha256"] == "ab" * 32
    assert entry["provenance"]["recorded"].startswith("2023-")
    informational = data["ThroughputCheck"]["references"]["sys:part"]["a=1"]["bw"]
    assert informational["lower"] is None
    assert (refs_dir / "through.yaml").read_text().startswith("# kept\n")
    # and the check now has a baseline there
    assert references.has_baseline(data["ThroughputCheck"], "sys:part", "a=1")


def test_record_baseline_takes_the_median_of_several_sessions_and_a_tolerance(refs_dir):
    sessions = [session(str(i), 1.7e9 + i, r) for i, r in enumerate([0.2, 0.9, 0.4])]
    chosen = baseline.choose_sessions(sessions, "sys", count=3)
    baseline.record(chosen, "sys", refs_dir=refs_dir, lower=0.25)
    entry = references.load(refs_dir / "through.yaml")["ThroughputCheck"]["references"][
        "sys:part"]["a=1"]["ratio"]
    assert entry["value"] == 0.4 and entry["lower"] == -0.25
    assert entry["provenance"]["median_of_sessions"] == ["0", "1", "2"]


def test_record_baseline_ignores_cases_whose_sanity_failed_and_other_systems(refs_dir):
    sessions = [session("1", 1.7e9, 0.5, fail_phase="sanity"),
                session("2", 1.7e9 + 5, 0.5, system="elsewhere")]
    assert baseline.record(sessions, "sys", refs_dir=refs_dir) == {}
    with pytest.raises(Failed, match="no stored session has performance values from system nowhere"):
        baseline.choose_sessions(sessions, "nowhere")
