"""The io500 parser on IO500 outputs as they were published, 2018 to 2025 (tests/data/io500,
provenance in PROVENANCE.yaml beside them): every score recomputed from its phases."""
import pathlib

import pytest
import yaml

from iostack_rfm.parsers import io500

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "io500"
PROVENANCE = yaml.safe_load((DATA / "PROVENANCE.yaml").read_text())

# file: (printed TOTAL, how TOTAL follows from the bandwidth and metadata scores, valid)
EXPECTED = {
    "2018-cern-io500sh.txt": ("36.06740", "product", True),
    "2019-azurehpc-io500sh.txt": ("4.90749", "sqrt", False),
    "2020-azurehpc-isc20.txt": ("3.116520", "sqrt", True),
    "2020-epcc-archer2-sc20.txt": ("10.679899", "sqrt", True),
    "2021-gwdg-sc21-extended.txt": ("12.549643", "sqrt", True),
    "2022-stackhpc-isc22.txt": ("1.559032", "sqrt", True),
    "2024-wcss-lem.txt": ("28.020091", "sqrt", True),
    "2025-nhr-fau-helma.txt": ("838.992571", "sqrt", True),
}


def text(name):
    return (DATA / name).read_text()


def test_every_output_has_its_provenance():
    assert sorted(p.name for p in DATA.glob("*.txt")) == sorted(PROVENANCE) == sorted(EXPECTED)
    for name, source in PROVENANCE.items():
        assert {"repository", "path", "commit", "licence", "format"} <= set(source), name
        assert len(source["commit"]) == 40, name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_score_is_recomputed_from_the_published_phases(name):
    total, formula, valid = EXPECTED[name]
    run = io500.parse(text(name))
    assert len([p for p in run.phases.values() if p.scored]) >= 12
    assert run.score is not None and run.score.total.text == total
    assert io500.check_score(run) is run.score
    assert io500.total_formula(run) == formula
    assert io500.score_problems(text(name)) == []
    assert run.valid is valid


def test_io500_sh_before_may_2018_printed_the_product():
    run = io500.parse(text("2018-cern-io500sh.txt"))
    bandwidth, metadata = (run.score.bandwidth.value, run.score.metadata.value)
    assert round(bandwidth * metadata, 4) == 36.0674
    # the same output with today's TOTAL is accepted too, a third value is not
    fixed = text("2018-cern-io500sh.txt").replace("TOTAL 36.06740", "TOTAL 6.00562")
    assert io500.total_formula(io500.parse(fixed)) == "sqrt"
    with pytest.raises(io500.ScoreMismatch, match="total"):
        io500.check_score(io500.parse(fixed.replace("TOTAL 6.00562", "TOTAL 7.00562")))


def test_the_2019_script_format_and_its_declared_invalidity():
    run = io500.parse(text("2019-azurehpc-io500sh.txt"))
    assert run.phases["ior-hard-write"].value.text == "0.237"
    assert run.phases["mdtest-hard-delete"].unit == io500.METADATA
    assert (run.score.bandwidth.text, run.score.metadata.text) == ("1.61907", "14.8749")
    # its score line is tagged "-valid", yet the run says it is not
    assert run.score.valid and not run.valid
    assert run.declared_invalid == ["One or more test phases invalid.  Not valid for IO-500 submission."]
    assert io500.invalid_parts(text("2019-azurehpc-io500sh.txt")) == [
        "run: One or more test phases invalid.  Not valid for IO-500 submission."]


def test_invalid_phases_and_scores_of_the_script_are_read():
    # io500_fixed.sh (VI4IO/io-500-dev) tags an invalid phase and score "-invalid"
    lines = text("2019-azurehpc-io500sh.txt").replace(
        "[RESULT] IOPS phase 2 ", "[RESULT-invalid] IOPS phase 2 ").replace("[SCORE-valid]", "[SCORE-invalid]")
    run = io500.parse(lines)
    assert not run.phases["mdtest-hard-write"].valid and not run.score.valid
    assert io500.invalid_parts(lines)[:2] == ["mdtest-hard-write", "score"]


def test_extended_score_of_a_published_run():
    run = io500.parse(text("2021-gwdg-sc21-extended.txt"))
    assert io500.check_score(run, extended=True).total.text == "12.662357"
    bandwidth, metadata = io500.scored_phases(run, extended=True)
    assert (len(bandwidth), len(metadata)) == (8, 11)
