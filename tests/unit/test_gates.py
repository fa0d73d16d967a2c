"""The gates' arithmetic (iostack.regression.gates): bands from the measured spread, and the history
test of the last nights against the nights before; and the nightly's use of it on stored
sessions. Whether the gates catch real slowdowns on this machine is in
tests/unit/test_gates_campaign.py (nights of the sensitivity campaign)."""
import pytest

from iostack.regression import gates, nightly, results
from support import targets


def test_robust_spread_ignores_one_outlier_night():
    nights = [100, 101, 99, 100.5, 99.5, 40]      # one night on a busy machine
    assert gates.robust_spread(nights) == pytest.approx(1.4826 * 0.75 / 99.75)
    assert gates.robust_spread([1, 2]) is None    # too few to estimate


def test_band_takes_the_widest_of_floor_and_measured_spread():
    assert gates.band([1.0] * 5, floor=-0.05).width == 0.05
    wide = gates.band([1.0, 0.9, 1.1, 0.95, 1.05], floor=-0.05)
    assert wide.source == "nights" and wide.width == pytest.approx(2.5 * 1.4826 * 0.05)
    # two nights: the within-run spread, widened
    assert gates.band([1.0, 1.0], [0.1, 0.3], floor=0.0).width == pytest.approx(
        2.5 * 2 * 0.2 / 1.7)
    # never a band that accepts anything
    assert gates.band([1.0, 0.1, 2.0, 0.2, 3.0]).width == 0.95


def test_the_band_holds_every_recorded_night_on_its_bad_side():
    slow_night = gates.band([1.0, 0.99, 1.01, 1.0, 0.6], floor=-0.05, lower_is_worse=True)
    assert slow_night.source == "worst-night" and 0.6 >= 1.0 * (1 - slow_night.width)
    long_night = gates.band([10.0, 10.1, 9.9, 10.0, 15.0], floor=0.05, lower_is_worse=False)
    assert long_night.source == "worst-night" and 15.0 <= 10.0 * (1 + long_night.width)
    # the good side's outlier widens nothing beyond the robust spread
    fast_night = gates.band([1.0, 0.99, 1.01, 1.0, 1.6], floor=-0.05, lower_is_worse=True)
    assert fast_night.source == "floor" and fast_night.width == 0.05


def test_leaving_one_night_out_at_most_the_worst_night_trips():
    # the 1/(N+1) bound holds for any shape of noise: heavy-tailed nights (Pareto), each
    # judged against the band recorded from the others
    import random
    rng = random.Random(7)
    for _ in range(50):
        nights = [100.0 / rng.paretovariate(1.5) for _ in range(20)]
        tripped = []
        for i, value in enumerate(nights):
            others = nights[:i] + nights[i + 1:]
            ref = sorted(others)[len(others) // 2 - 1:len(others) // 2 + 1]
            median = sum(ref) / 2
            width = gates.band(others, floor=-0.05, lower_is_worse=True).width
            tripped.append(value < median * (1 - width))
        assert sum(tripped) <= 1 and (not any(tripped) or
                                       tripped.index(True) == nights.index(min(nights)))


HISTORY = [100.0, 97.0, 103.0, 99.0, 101.0, 98.0, 102.0, 100.5, 99.5, 100.0, 96.0, 104.0]


def test_three_nights_below_every_earlier_one_are_a_regression():
    found = gates.history_verdict(HISTORY + [80.0, 82.0, 79.0], lower_is_worse=True)
    assert found.regressed
    assert found.p_value == pytest.approx(1 / 455)     # 1 / C(15, 3): the lowest 3 of 15
    assert found.shift == pytest.approx(80 / 100 - 1)
    assert "last 3 nights' median 80 vs 100 over the 12 before (-20.0%" in found.describe()


def test_nights_like_the_others_are_not():
    assert not gates.history_verdict(HISTORY + [99.0, 101.0, 100.0], True).regressed


def test_one_bad_night_alone_is_left_to_the_band():
    found = gates.history_verdict(HISTORY + [100.0, 100.0, 60.0], True)
    assert not found.regressed and found.p_value > gates.ALPHA


def test_a_significant_but_small_shift_is_not_a_failure():
    steady = [100.0 + 0.01 * i for i in range(12)]
    found = gates.history_verdict(steady + [97.0, 97.1, 97.2], True)
    assert found.p_value < gates.ALPHA and not found.regressed   # -3%: under MIN_SHIFT


def test_higher_is_worse_for_times():
    assert gates.history_verdict(HISTORY + [125.0, 130.0, 128.0], lower_is_worse=False).regressed
    assert not gates.history_verdict(HISTORY + [125.0, 130.0, 128.0], lower_is_worse=True).regressed


def test_too_short_a_history_says_nothing():
    assert gates.history_verdict([100.0] * 5 + [50.0] * 3, True) is None


def session(uuid, t, ratio, phase=None):
    return {"session_info": {"uuid": uuid, "time_start_unix": t},
            "runs": [{"testcases": [{
                "name": "ThroughputCheck %a=1", "system": "sys", "partition": "part",
                "environ": "env", "filename": "/x/checks/through.py",
                "result": "fail" if phase else "pass", "fail_phase": phase,
                "reference_variant": "a=1",
                "perfvalues": {"sys:part:ratio": [ratio, 1.0, -0.5, None, "ratio", "pass"]}}]}]}


def test_the_nightly_names_a_persistent_regression(tmp_path, monkeypatch):
    (tmp_path / "through.yaml").write_text(
        "ThroughputCheck:\n  thresholds:\n    ratio: {lower: -0.05, upper: null, unit: ratio}\n"
        "  references:\n    sys:part:\n      a=1:\n        ratio: {value: 1.0, lower: -0.3, "
        "upper: null, unit: ratio, provenance: {recorded: '2023-11-14T22:13:20Z'}}\n")
    ratios = [v / 100 for v in HISTORY] + [0.8, 0.82, 0.79]
    sessions = [session(str(i), 1.7e9 + i, r) for i, r in enumerate(ratios)]
    # a night whose sanity failed is no measurement; nights before the reference are not
    # the history it accepted
    sessions.insert(5, session("bad", 1.7e9 + 4.5, 0.1, phase="sanity"))
    sessions.insert(0, session("older", 1.6e9, 0.1))
    target = targets.of(tmp_path, system="sys", IOSTACK_RFM_REFERENCES=tmp_path)
    monkeypatch.setattr(results, "stored_sessions", lambda t: sessions if t == target else [])
    (line,) = nightly.history_regressions(sessions[-1], target)
    assert line.startswith("ThroughputCheck %a=1 @sys:part+env ratio: last 3 nights' median "
                           "0.8 vs 1 over the 12 before (-20.0%")
    # the same nights without the slowdown
    clean = sessions[:-3] + [session(str(i), 1.8e9 + i, 1.0) for i in range(3)]
    monkeypatch.setattr(results, "stored_sessions", lambda t: clean)
    assert nightly.history_regressions(clean[-1], target) == []
