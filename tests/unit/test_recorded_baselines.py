"""The committed timing references and the nights they were recorded from: the clean nights
of a baseline campaign (`iostack-testbed campaign run`, then `campaign analyse --series`)
are committed in tests/data/baselines/, and every reference value whose sessions are among
them is their median (`record-baseline --session ...`). So a
reviewer can check a number against its nights, and a value edited by hand, or recorded
from other nights than those committed, fails here."""
import collections
import json
import pathlib
import re
import statistics

import pytest

from iostack.regression import references

SERIES = sorted((pathlib.Path(__file__).parents[1] / "data" / "baselines").glob("*.json"))
#: a baseline is the median of this many clean nights (reframe-tests/README.md, "Gates")
NIGHTS = 20
_PARAM = re.compile(r"%(\w+)=(\S+)")


def parse(key: str) -> tuple[str, str, str, str]:
    """(check, variant, environment, variable) of a night's value key, as
    'Check %a=1 %b=x @partition+environ|variable'."""
    name, var = key.rsplit("|", 1)
    check = name.split()[0]
    environ = name.rsplit("@", 1)[1].partition("+")[2]
    return check, references.variant_key(dict(_PARAM.findall(name))), environ, var


def committed_nights() -> dict[tuple, dict[str, float]]:
    """{(check, variant, environment, variable): {session: value}} of the committed clean
    nights."""
    values: dict[tuple, dict[str, float]] = collections.defaultdict(dict)
    for path in SERIES:
        for night in json.loads(path.read_text())["nights"]:
            assert night["slowdown"] == "clean" and night["sanity_failed"] == [], path.name
            for key, value in night["values"].items():
                values[parse(key)][night["session"]] = value
    return values


def recorded_from_series():
    """(file, check, key, variant, variable, entry) of every reference value whose nights
    are all in the committed series (which keeps the gated values and their spreads)."""
    nights = committed_nights()
    sessions = {s for by in nights.values() for s in by}
    for path in sorted(references.REFERENCES_DIR.glob("*.yaml")):
        for check, section in references.load(path).items():
            for key, variants in (section.get("references") or {}).items():
                for variant, entries in variants.items():
                    for var, e in entries.items():
                        prov = e.get("provenance") or {}
                        named = prov.get("median_of_sessions") or [prov.get("session")]
                        kept = (check, variant, references.split_key(key)[1], var) in nights
                        if kept and set(named) <= sessions:
                            yield path.name, check, key, variant, var, e


pytestmark = pytest.mark.skipif(not SERIES, reason="no baseline nights committed")


def test_the_series_are_the_clean_nights_of_every_timed_figure():
    checks = {check for check, *_ in committed_nights()}
    assert checks == {"FdbThroughputCheck", "FdbWriterScalingCheck", "IorLayoutCheck",
                      "MdtestScalingCheck", "IO500Check", "NetcdfOutputCheck",
                      "OpenFOAMPitzDailyCheck"}
    # every night of the campaign, a night record-baseline refused (one that failed against
    # another node's figure) and the one that replaced it included
    assert min(len(by) for by in committed_nights().values()) >= NIGHTS


def mismatches() -> tuple[list[str], int]:
    """(the values recorded from the series that are not their nights' median; how many
    were checked). That no value names a -dirty commit is test_references.py's."""
    nights = committed_nights()
    wrong, checked = [], 0
    for name, check, key, variant, var, e in recorded_from_series():
        environ = references.split_key(key)[1]
        by_session = nights[(check, variant, environ, var)]
        named = e["provenance"].get("median_of_sessions") or []
        median = statistics.median(by_session[s] for s in named) if named else None
        if len(named) != NIGHTS or e["value"] != pytest.approx(median, rel=1e-12):
            wrong.append(f"{name} {check} {key} {variant} {var}: {e['value']} ({median})")
        checked += 1
    return wrong, checked


def test_every_value_recorded_from_the_series_is_the_median_of_its_nights():
    wrong, checked = mismatches()
    assert wrong == []
    # the 25 gated figures of the timed checks, each with its spread
    gated = {(c, variant, v) for _, c, _, variant, v, e in recorded_from_series()
             if e.get("lower") is not None or e.get("upper") is not None}
    assert len(gated) == 25 and checked > len(gated), (checked, sorted(gated))


def test_a_value_edited_by_hand_is_caught(tmp_path, monkeypatch):
    """The check above fails, naming it, on a reference 0.1% away from its nights' median."""
    import shutil

    (name, check, key, variant, var, _) = next(recorded_from_series())
    shutil.copytree(references.REFERENCES_DIR, tmp_path / "refs")
    data = references.load(tmp_path / "refs" / name)
    data[check]["references"][key][variant][var]["value"] *= 1.001
    references.dump(tmp_path / "refs" / name, data)
    monkeypatch.setattr(references, "REFERENCES_DIR", tmp_path / "refs")
    wrong, _ = mismatches()
    assert [w.split(": ", 1)[0] for w in wrong] == [f"{name} {check} {key} {variant} {var}"]
