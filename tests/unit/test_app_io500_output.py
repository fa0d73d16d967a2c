"""io500 parser and score, on io500 output of three generations written here in the formats
the io500 sources print, and on a rounding case of [IO500-OFP]'s published scores."""
import math

import pytest

from iostack_rfm.parsers import io500

# io500 application, standard mode (2022 on: "[SCORE ]" with a space)
STANDARD_RUN = """\
IO500 version io500-isc22_v2 (standard)
[RESULT]       ior-easy-write       12.483215 GiB/s : time 318.402 seconds
[RESULT]    mdtest-easy-write       48.320117 kIOPS : time 305.118 seconds
[      ]            timestamp        0.000000 kIOPS : time 0.001 seconds
[RESULT]       ior-hard-write        0.941207 GiB/s : time 331.550 seconds
[RESULT]    mdtest-hard-write        9.875310 kIOPS : time 302.774 seconds
[RESULT]                 find      512.660842 kIOPS : time 12.031 seconds
[RESULT]        ior-easy-read       15.120984 GiB/s : time 262.871 seconds
[RESULT]     mdtest-easy-stat      160.213457 kIOPS : time 92.004 seconds
[RESULT]        ior-hard-read        3.402871 GiB/s : time 91.660 seconds
[RESULT]     mdtest-hard-stat       95.004118 kIOPS : time 31.478 seconds
[RESULT]   mdtest-easy-delete       40.551092 kIOPS : time 363.580 seconds
[RESULT]     mdtest-hard-read       30.117764 kIOPS : time 99.302 seconds
[RESULT]   mdtest-hard-delete       12.900441 kIOPS : time 231.845 seconds
[SCORE ] Bandwidth 4.958602 GiB/s : IOPS 52.607482 kiops : TOTAL 16.151148

The result files are stored in the directory: ./results/2024.03.02-10.11.12
"""

# extended mode: optional phases scored only in [SCOREX]; mdworkbench-create is never scored
EXTENDED_EXTRA = """\
[RESULT]      ior-rnd4K-write        0.052131 GiB/s : time 300.912 seconds
[RESULT]       ior-rnd4K-read        0.210044 GiB/s : time 74.650 seconds
[      ]   mdworkbench-create       14.020000 kIOPS : time 41.200 seconds
[RESULT]            find-easy      700.100000 kIOPS : time 8.800 seconds
[RESULT]            find-hard       80.220000 kIOPS : time 60.100 seconds
[RESULT]    mdworkbench-bench       25.500000 kIOPS : time 301.020 seconds
"""
EXTENDED_RUN = (STANDARD_RUN.replace("(standard)", "(extended)")
                .replace("[SCORE ]", EXTENDED_EXTRA + "[SCORE ]")
                .replace("\nThe result", "[SCOREX] Bandwidth 1.370273 GiB/s : IOPS 64.759835 kiops "
                                         ": TOTAL 9.420121\n\nThe result"))

# io500.sh of 2017-2019 (underscored names, "GB/s" meaning GiB/s)
SCRIPT_RUN = """\
[RESULT] BW   phase 1            ior_easy_write                5.112 GB/s : time 316.02 seconds
[RESULT] IOPS phase 1         mdtest_easy_write                6.212 kiops : time 301.77 seconds
[RESULT] BW   phase 2            ior_hard_write                0.203 GB/s : time 308.91 seconds
[RESULT] IOPS phase 2         mdtest_hard_write                1.104 kiops : time 305.40 seconds
[RESULT] IOPS phase 3                      find               38.500 kiops : time 21.07 seconds
[RESULT] BW   phase 3             ior_easy_read                4.870 GB/s : time 331.26 seconds
[RESULT] IOPS phase 4          mdtest_easy_stat               40.250 kiops : time 47.19 seconds
[RESULT] BW   phase 4             ior_hard_read                0.731 GB/s : time 85.73 seconds
[RESULT] IOPS phase 5          mdtest_hard_stat               10.880 kiops : time 31.30 seconds
[RESULT] IOPS phase 6        mdtest_easy_delete                9.415 kiops : time 199.66 seconds
[RESULT] IOPS phase 7          mdtest_hard_read                7.600 kiops : time 44.75 seconds
[RESULT] IOPS phase 8        mdtest_hard_delete                1.980 kiops : time 170.61 seconds
[SCORE] Bandwidth 1.3864 GB/s : IOPS 7.9762 kiops : TOTAL 3.3254
"""

def test_a_score_printed_from_unrounded_means_is_accepted():
    # [IO500-OFP]'s first place: 471.25 x 21.85 = 10296.8, whose square root is 101.47,
    # printed 101.48 from the unrounded means; the rounding allows it, a larger gap not
    assert round(io500.total_score(471.25, 21.85), 2) == 101.47
    io500.check_total("471.25", "21.85", "101.48")
    with pytest.raises(io500.ScoreMismatch):
        io500.check_total("471.25", "21.85", "101.50")


def test_standard_run_phases_and_score():
    run = io500.parse(STANDARD_RUN)
    assert len(run.phases) == 13
    assert run.phases["ior-easy-write"].value.value == 12.483215
    assert run.phases["ior-easy-write"].unit == io500.BANDWIDTH
    assert run.phases["find"].unit == io500.METADATA
    assert run.phases["mdtest-hard-delete"].seconds == 231.845
    assert not run.phases["timestamp"].scored
    bandwidth, metadata = io500.scored_phases(run)
    assert [p.name for p in bandwidth] == list(io500.STANDARD_BANDWIDTH_PHASES)
    assert len(metadata) == 8
    assert run.score.total.value == 16.151148 and run.valid
    assert io500.check_score(run) is run.score

    bw, md, total = io500.score([p.value.value for p in bandwidth], [p.value.value for p in metadata])
    assert (round(bw, 6), round(md, 6), round(total, 6)) == (4.958602, 52.607482, 16.151148)
    assert total == pytest.approx(math.sqrt(bw * md))


def test_extended_run_scores_optional_phases_only_in_scorex():
    run = io500.parse(EXTENDED_RUN)
    assert io500.check_score(run).total.text == "16.151148"
    assert io500.check_score(run, extended=True).total.text == "9.420121"
    bandwidth, metadata = io500.scored_phases(run, extended=True)
    assert len(bandwidth) == 6 and len(metadata) == 11
    assert "mdworkbench-create" not in [p.name for p in metadata]


def test_2017_script_format():
    run = io500.parse(SCRIPT_RUN)
    assert sorted(run.phases) == sorted(io500.STANDARD_BANDWIDTH_PHASES + io500.STANDARD_METADATA_PHASES)
    assert run.phases["ior-hard-write"].value.text == "0.203"
    assert run.phases["ior-hard-write"].unit == io500.BANDWIDTH
    assert io500.check_score(run).total.value == 3.3254


def test_a_changed_phase_breaks_the_cross_check():
    tampered = STANDARD_RUN.replace("0.941207 GiB/s", "0.951207 GiB/s")
    with pytest.raises(io500.ScoreMismatch, match="bandwidth"):
        io500.check_score(io500.parse(tampered))
    # rounding in the last printed digit is not a mismatch
    nudged = STANDARD_RUN.replace("TOTAL 16.151148", "TOTAL 16.151149")
    io500.check_score(io500.parse(nudged))


def test_invalid_markers():
    run = io500.parse(STANDARD_RUN.replace("time 91.660 seconds", "time 91.660 seconds [INVALID]")
                      .replace("TOTAL 16.151148", "TOTAL 16.151148 [INVALID]"))
    assert not run.phases["ior-hard-read"].valid and not run.score.valid and not run.valid
    old = io500.parse("\t[RESULT-invalid]   mdtest-easy-delete        0.003029 kIOPS : time 1147.474 seconds\n")
    assert not old.phases["mdtest-easy-delete"].valid


def test_missing_score_line():
    with pytest.raises(io500.ScoreMismatch, match="no \\[SCORE\\]"):
        io500.check_score(io500.parse(STANDARD_RUN.split("[SCORE ]")[0]))


def test_reading_bounds():
    r = io500.Reading("101.48")
    assert (r.value, r.half_step) == (101.48, pytest.approx(0.005))
    assert io500.Reading("1.5e+02").half_step == pytest.approx(5.0)
