"""Bounds of the nightly in the ReFrame configuration: every partition limits its jobs'
time, and the modes ReFrame knows are the ones bin/iostack nightly bounds and checks."""
import importlib.util

import pytest

from iostack.core import paths
from iostack.regression import nightly


def load_config(monkeypatch, tmp_path, offsite):
    monkeypatch.setenv("IOSTACK_RFM_STATE", str(tmp_path))
    monkeypatch.setenv("IOSTACK_RFM_OFFSITE", "1" if offsite else "0")
    spec = importlib.util.spec_from_file_location("iostack_rfm_config", paths.REFRAME_CONFIG)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.site_configuration


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
    assert nightly.MODES["nightly"].checks < nightly.MODES["weekly"].checks
    assert nightly.MODES["nightly"].wall_clock_seconds < nightly.MODES["weekly"].wall_clock_seconds
