"""IO500 check pieces: the generated ini, and seed 004's Oakforest-PACS scores kept as
documented references (each row's score must follow from its two means)."""
import pathlib

import pytest
import yaml

from iostack_rfm.apps import io500
from iostack_rfm.parsers import io500 as parser

REFERENCES = pathlib.Path(__file__).resolve().parents[2] / "reframe-tests/references/io500.yaml"

# seed 004, Tables 3 (Lustre) and 4 (IME): procs, GiB/s, kIOPS, score; * = under 5 minutes
TABLE_3 = [(1024, "10.10*", "73.05*", "27.17*"), (2048, "14.88*", "84.23*", "35.40*"),
           (4096, "16.76", "83.05*", "37.30*"), (8192, "20.04", "88.78*", "42.18*"),
           (16384, "21.04*", "67.19", "37.60*")]
TABLE_4 = [(2048, "151.31", "35.22*", "73.00*"), (4096, "257.52", "41.01*", "102.76*"),
           (8192, "371.12", "22.80", "92.00"), (16384, "471.25", "21.85", "101.48")]


def test_ini_has_the_checks_settings_and_io500_defaults_elsewhere():
    config = io500.IO500Config(datadir="/lus/scratch/io500", stonewall_seconds=30)
    sections = io500.parse_ini(config.render())
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
    sections = io500.parse_ini(config.render())
    assert sections["find"] == {"nproc": "4"} and sections["ior-easy"]["blockSize"] == "1g"


def test_ini_parser_refuses_garbage():
    with pytest.raises(ValueError):
        io500.parse_ini("[global]\nnot an option\n")


def _documented(system):
    section = yaml.safe_load(REFERENCES.read_text())["IO500Check"]
    rows = {}
    for variant, entries in section["references"][system].items():
        procs = int(variant.removeprefix("procs="))
        rows[procs] = entries
    return rows


@pytest.mark.parametrize("system,table", [("oakforest-pacs:lustre", TABLE_3),
                                          ("oakforest-pacs:ime", TABLE_4)])
def test_oakforest_pacs_scores_are_the_seeds(system, table):
    rows = _documented(system)
    assert sorted(rows) == [r[0] for r in table]
    for procs, bw, md, score in table:
        entries = rows[procs]
        for key, printed in (("bandwidth", bw), ("metadata", md), ("score", score)):
            assert f"{entries[key]['value']:.2f}" == printed.rstrip("*"), (procs, key)
            # the seed's asterisk travels with the number
            assert entries[key]["provenance"].get("below_rules", False) == printed.endswith("*")
        # score = sqrt(bandwidth x metadata), to the printed digits
        parser.check_total(bw.rstrip("*"), md.rstrip("*"), score.rstrip("*"))


def test_first_on_the_november_2017_list():
    assert _documented("oakforest-pacs:ime")[16384]["score"]["value"] == 101.48


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
        unit = parser.BANDWIDTH if name.startswith("ior") else parser.METADATA
        mark = " [INVALID]" if name in invalid else ""
        lines.append(f"[RESULT] {name:>20s} {value:15.6f} {unit} : time 300.123 seconds{mark}")
    bw, md, total = score or parser.score(
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
    bw, md, total = parser.score(
        [v for n, v in PHASE_VALUES.items() if n.startswith("ior")],
        [v for n, v in PHASE_VALUES.items() if not n.startswith("ior")])
    (problem,) = io500.score_problems(io500_output(score=(bw, md, total * 1.01)))
    assert problem.startswith("total score printed as")
