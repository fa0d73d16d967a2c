"""IO500 check pieces: the generated ini (read back with Python's own INI parser, not
ours), what makes a run count, and [IO500-OFP]'s documented scores kept consistent with the
score formula."""
import configparser

import pytest

from iostack.regression import references
from iostack_rfm.parsers import io500


def read_ini(text):
    """The sections of an io500 ini, as an INI reader outside this repository sees them."""
    ini = configparser.RawConfigParser(comment_prefixes=("#",), inline_comment_prefixes=("#",))
    ini.optionxform = str       # io500's option names are case-sensitive
    ini.read_string(text)
    return {name: dict(ini[name]) for name in ini.sections()}


def test_ini_has_the_checks_settings_and_io500_defaults_elsewhere():
    config = io500.IO500Config(datadir="/lus/scratch/io500", stonewall_seconds=30)
    sections = read_ini(config.render())
    assert list(sections) == ["global", "debug", "ior-easy", "mdtest-easy", "ior-hard",
                              "mdtest-hard", "find"]
    assert sections["global"]["datadir"] == "/lus/scratch/io500"
    assert sections["global"]["timestamp-datadir"] == "FALSE"
    assert sections["debug"] == {"stonewall-time": "30"}
    assert sections["ior-easy"]["filePerProc"] == "TRUE"
    # the rules' transfer and file sizes are io500's own defaults: not overridden
    assert "transferSize" not in sections["ior-hard"]
    assert not config.follows_rules
    assert io500.IO500Config(datadir="d").follows_rules


def test_extra_options_merge():
    config = io500.IO500Config(datadir="d", extra={"find": {"nproc": "4"},
                                                   "ior-easy": {"blockSize": "1g"}})
    sections = read_ini(config.render())
    assert sections["find"] == {"nproc": "4"} and sections["ior-easy"]["blockSize"] == "1g"


def documented_rows():
    """Every (system, variant) of the IO500 references that comes from a document."""
    section = references.load(references.REFERENCES_DIR / "io500.yaml")["IO500Check"]
    for system, variants in section["references"].items():
        for variant, entries in variants.items():
            if all("source" in e["provenance"] for e in entries.values()):
                yield system, variant, entries


@pytest.mark.parametrize("system,variant,entries", list(documented_rows()),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_documented_scores_follow_from_their_two_means(system, variant, entries):
    assert set(entries) == {"bandwidth", "metadata", "score"}
    bw, md, score = (f"{entries[k]['value']:.2f}" for k in ("bandwidth", "metadata", "score"))
    # score = sqrt(bandwidth x metadata), to the printed digits (means printed to 0.01 move
    # the score by up to ~0.013 at these magnitudes)
    assert abs(io500.check_total(bw, md, score) - float(score)) < 0.015
    # a score made from a value below the rules (phases under 5 minutes) is below them too
    def marked(key):
        return bool(entries[key]["provenance"].get("below_rules"))
    assert marked("score") == (marked("bandwidth") or marked("metadata"))


def test_a_documented_score_that_does_not_follow_is_caught():
    # the check above can fail: a score off by one in its last printed digit
    (_, _, entries), *_ = documented_rows()
    bw, md = (f"{entries[k]['value']:.2f}" for k in ("bandwidth", "metadata"))
    wrong = f"{io500.total_score(float(bw), float(md)) + 0.02:.2f}"
    with pytest.raises(io500.ScoreMismatch):
        io500.check_total(bw, md, wrong)


PHASE_VALUES = {"ior-easy-write": 1.234567, "mdtest-easy-write": 35.714169,
                "ior-hard-write": 0.052133, "mdtest-hard-write": 12.500000, "find": 900.123456,
                "ior-easy-read": 2.345678, "mdtest-easy-stat": 120.000001,
                "ior-hard-read": 0.500000, "mdtest-hard-stat": 80.250000,
                "mdtest-easy-delete": 30.000000, "mdtest-hard-read": 40.000000,
                "mdtest-hard-delete": 10.101010}


def io500_output(values=PHASE_VALUES, invalid=(), score=None):
    """stdout of the io500 application (2022 on), laid out as it prints it."""
    lines = []
    for name, value in values.items():
        unit = io500.BANDWIDTH if name.startswith("ior") else io500.METADATA
        mark = " [INVALID]" if name in invalid else ""
        lines.append(f"[RESULT] {name:>20s} {value:15.6f} {unit} : time 300.123 seconds{mark}")
    bw, md, total = score or io500.score(
        [v for n, v in values.items() if n.startswith("ior")],
        [v for n, v in values.items() if not n.startswith("ior")])
    mark = " [INVALID]" if invalid else ""
    lines.append(f"[SCORE ] Bandwidth {bw:.6f} GiB/s : IOPS {md:.6f} kiops : TOTAL {total:.6f}{mark}")
    return "\n".join(lines) + "\n"


def test_a_consistent_run_has_no_problems():
    text = io500_output()
    assert io500.score_problems(text) == [] and io500.invalid_parts(text) == []


def test_a_short_run_is_flagged_invalid_but_consistent():
    text = io500_output(invalid=("ior-easy-write", "mdtest-hard-write"))
    assert io500.score_problems(text) == []
    assert io500.invalid_parts(text) == ["ior-easy-write", "mdtest-hard-write", "score"]


def test_a_missing_phase_and_a_wrong_score_are_named():
    values = dict(PHASE_VALUES)
    del values["find"]
    assert io500.score_problems(io500_output(values)) == ["no [RESULT] for find"]
    bw, md, total = io500.score(
        [v for n, v in PHASE_VALUES.items() if n.startswith("ior")],
        [v for n, v in PHASE_VALUES.items() if not n.startswith("ior")])
    (problem,) = io500.score_problems(io500_output(score=(bw, md, total * 1.01)))
    assert problem.startswith("total score printed as")
