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
