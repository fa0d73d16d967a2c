"""OpenIFS ifs.stat / NODE.001_01 parsing and forecast days per wall-clock day ([OIFS-HECToR]).

The lines below are made up but laid out as IFS writes them (OPDIS for ifs.stat, LOGDIS
for the step lines of NODE.001_01): a 10-day T159-like forecast, 1-hour steps, finishing
after 4:16 of wall time. The middle steps are left out; the parser needs no contiguity.
"""
import pytest

from iostack_rfm.jobs import openifs

IFS_STAT = """\
 10:20:31 0AAA00AAA CNT3                   0    4.104    4.104    4.287      0:04      0:04 0.15992473339643E-04    1190MB    3410KB    2204MB      0kJ    0W
 10:20:33 AAAA00AAA STEPO                  0    1.918    1.918    1.948      0:06      0:06 0.15992470000000E-04    1190MB    3410KB    2204MB      0kJ    0W
 10:20:35 AAAA00AAA STEPO                  1    1.979    1.979    2.009      0:08      0:08 0.15992570000000E-04    1190MB    3410KB    2204MB      0kJ    0W
 10:20:37 AAAA00AAA STEPO                  2    1.944    1.944    1.974      0:09      0:10 0.15992670000000E-04    1190MB    3410KB    2204MB      0kJ    0W
 10:24:42 AAAA00AAA STEPO                238    1.001    1.001    1.032      4:09      4:13 0.15991104410026E-04    1204MB    3410KB    2210MB      0kJ    0W
 10:24:43 AAAA00AAA STEPO                239    0.998    0.998    1.029      4:10      4:14 0.15991102871350E-04    1204MB    3410KB    2210MB      0kJ    0W
 10:24:44 AAAA00AAA STEPO                240    1.012    1.012    1.041      4:11      4:15 0.15991101130094E-04    1204MB    3410KB    2210MB      0kJ    0W
 10:24:45 000000000 CNT0                 240    0.611    0.611    0.702      4:12      4:16 0.15991101130094E-04    1204MB    3410KB    2210MB      0kJ    0W
"""

NODE = """\
 (set-up output: namelists, geometry, fields read)
 10:20:33 STEP    0 H=   0:00 +CPU=  1.948
 10:20:35 STEP    1 H=   1:00 +CPU=  2.009
 10:20:37 STEP    2 H=   2:00 +CPU=  1.974
 10:24:42 STEP  238 H= 238:00 +CPU=  1.032
 10:24:43 STEP  239 H= 239:00 +CPU=  1.029
 10:24:44 STEP  240 H= 240:00 +CPU=  1.041
 END CNT0
"""


def test_ifs_stat_lines():
    lines = openifs.parse_ifs_stat(IFS_STAT)
    assert len(lines) == 8
    steps = [line for line in lines if line.caller == "STEPO"]
    assert [s.step for s in steps] == [0, 1, 2, 238, 239, 240]
    assert steps[1].cpu_seconds == 1.979 and steps[1].wall_seconds == 2.009
    assert steps[1].config == "AAAA00AAA"
    assert lines[-1].total_wall_seconds == 4 * 60 + 16
    assert lines[-1].total_cpu_seconds == 4 * 60 + 12


def test_node_step_lines():
    steps = openifs.parse_node_steps(NODE)
    assert len(steps) == 6
    assert steps[-1].step == 240 and steps[-1].forecast_seconds == 240 * 3600
    assert steps[1].seconds == 2.009


def test_forecast_days_per_day_from_stat_and_node():
    run = openifs.summarize(IFS_STAT, NODE)
    assert run.forecast_days == 10.0
    assert run.wall_seconds == 256.0
    assert run.steps == 240
    # 10 days in 256 s: 10 * 86400 / 256
    assert run.forecast_days_per_day == 3375.0


def test_forecast_length_other_ways():
    assert openifs.summarize(IFS_STAT, timestep_seconds=3600).forecast_days == 10.0
    assert openifs.summarize(IFS_STAT, forecast_hours=120).forecast_days_per_day == 1687.5
    with pytest.raises(ValueError, match="forecast length"):
        openifs.summarize(IFS_STAT)
    with pytest.raises(ValueError, match="no ifs.stat"):
        openifs.summarize("", NODE)


def test_older_and_nonhydrostatic_layouts():
    # older cycles stop after the norm; NH runs print three norms
    old = " 09:00:01 AAAA00AAA STEPO                 12    0.501    0.500    0.530      0:07      0:08 0.12345678901234E-04\n"
    nh = (" 09:00:02 AAAA00AAA STEPO                 13    0.511    0.510    0.520      0:07      0:09"
          " 0.12345678901234E-04 0.22345678901234E-04 0.32345678901234E-04     812MB    2048KB    1500MB      0kJ    0W\n")
    lines = openifs.parse_ifs_stat(old + nh)
    assert [(s.step, s.total_wall_seconds) for s in lines] == [(12, 8), (13, 9)]


def test_oifs_hector_table_2_metric():
    # T511 on HECToR: 679 forecast days per day without FDB; a 10-day forecast then
    # takes 10 * 86400 / 679 s of wall time
    assert openifs.forecast_days_per_day(10, 10 * 86400 / 679) == pytest.approx(679)
    with pytest.raises(ValueError):
        openifs.forecast_days_per_day(10, 0)
