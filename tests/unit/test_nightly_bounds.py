"""Bounds of the nightly in the ReFrame configuration: every partition limits its jobs'
time, and the modes ReFrame knows are the ones bin/iostack nightly bounds and checks."""
import pytest
from support import rfm_config

from iostack.regression import nightly


def load_config(monkeypatch, tmp_path, offsite):
    return rfm_config.load_all(tmp_path, offsite)


def seconds(limit: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    return int(limit[:-1]) * units[limit[-1]]


@pytest.mark.parametrize("offsite", [False, True])
def test_every_partition_limits_its_jobs_time(monkeypatch, tmp_path, offsite):
    """[issue 12] a job blocked on a full disk must not hold a node for ever."""
    config = load_config(monkeypatch, tmp_path, offsite)
    for system in config["systems"]:
        for p in system["partitions"]:
            name = f"{system['name']}:{p['name']}"
            assert "time_limit" in p, f"{name} has no time_limit"
            assert 0 < seconds(p["time_limit"]) <= 6 * 3600, name
            assert seconds(p["time_limit"]) < min(m.wall_clock_seconds for m in nightly.MODES.values())


def test_the_modes_reframe_knows_are_the_ones_the_nightly_bounds(monkeypatch, tmp_path):
    config = load_config(monkeypatch, tmp_path, False)
    assert [m["name"] for m in config["modes"]] == list(nightly.MODES)
    # which checks each mode loads, against ReFrame's own listing of the checks:
    # tests/integration/test_nightly_robust.py (MODES)
