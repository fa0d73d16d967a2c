"""The gates on real nights: tests/data/campaign/*.json are nights of the sensitivity
campaign (tools/sensitivity_campaign.py) on a deployed `local`, clean and slowed by real
mechanisms (cgroup v1 CPU quota and direct-write throttle on the scratch disk), none a change
to a measured number. Each gated figure's gate passes every clean night judged against the
other clean nights (the band record-baseline would make from them), and trips on the nights
slowed by the size it is designed to catch on this machine (reframe-tests/README.md, the
sensitivity table)."""
import json
import pathlib
import statistics
import sys

import pytest

from iostack.core import paths

sys.path.insert(0, str(paths.REPO / "tools"))
import sensitivity_campaign as campaign  # noqa: E402

CAMPAIGNS = sorted((pathlib.Path(__file__).parents[1] / "data" / "campaign").glob("*.json"))
#: gated value (check class | variable) -> the slowdown it is designed to catch here
DESIGNED = {
    "FdbThroughputCheck|fdb_write_ratio": "cpu:0.5",
    "IorLayoutCheck|write_fpp": "blkio:0.5",
    "IorLayoutCheck|write_shared": "blkio:0.5",
    "MdtestScalingCheck|creation_shared_dir": "cpu:0.5",
    "IO500Check|score": "cpu:0.5",
    "NetcdfOutputCheck|seconds_batching": "blkio:0.5",
    "OpenFOAMPitzDailyCheck|wall_serial": "cpu:0.5",
}


def nights():
    out = []
    for path in CAMPAIGNS:
        out += json.loads(path.read_text())["nights"]
    return out


def cases():
    """(figure key, slowdown) pairs with data: one test each."""
    found = []
    series = campaign.series(nights())
    for _figure, keys in sorted(series.items()):
        for key, by_slowdown in sorted(keys.items()):
            check = key.split()[0].split("%")[0]
            designed = DESIGNED.get(f"{check}|{key.split('|')[1]}")
            if designed and "clean" in by_slowdown and designed in by_slowdown:
                found.append((key, designed))
    return found


pytestmark = pytest.mark.skipif(not CAMPAIGNS, reason="no campaign recorded yet")


@pytest.mark.parametrize("key,slowdown", cases())
def test_the_gate_passes_clean_nights_and_trips_on_its_designed_slowdown(key, slowdown):
    series = campaign.series(nights())
    figure = next(f for f, keys in series.items() if key in keys)
    clean, slowed = series[figure][key]["clean"], series[figure][key][slowdown]
    within = campaign.spreads(nights()).get(key, [])
    low_bad = campaign.lower_is_worse(key)
    floor = campaign.floor_of(key)
    assert len(clean) >= 3
    for i, value in enumerate(clean):
        others = clean[:i] + clean[i + 1:]
        assert not campaign.tripped(value, others, within, floor, low_bad), \
            (key, "clean", value, statistics.median(others))
    for value in slowed:
        assert campaign.tripped(value, clean, within, floor, low_bad), \
            (key, slowdown, value, statistics.median(clean))


def test_every_designed_figure_has_recorded_nights():
    keys = {f"{k.split()[0].split('%')[0]}|{k.split('|')[1]}" for k, _ in cases()}
    assert keys == set(DESIGNED)
