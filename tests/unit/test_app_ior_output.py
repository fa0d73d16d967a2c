"""IOR and mdtest output parsing: real IOR 4.0.0 / mdtest 4.0.0 runs (tests/data/ior), and
made-up mdtest tables laid out with the printf formats of mdtest 4.0 / 3.3 (mdtest.c) for
the layouts this node's mdtest does not print."""
import pathlib

import pytest

from iostack_rfm.parsers import ior

DATA = pathlib.Path(__file__).parents[1] / "data" / "ior"

MDTEST_4 = """\
-- started at 03/05/2024 10:05:00 --

mdtest-4.0.0 was launched with 8 total task(s) on 2 node(s)
Command line used: mdtest '-n' '1000' '-i' '3' '-u' '-d' '/lustre/scratch/md'
Path: /lustre/scratch
FS: 1.2 PiB   Used FS: 41.0%   Inodes: 800.0 Mi   Used Inodes: 12.3%

Nodemap: 11110000
8 tasks, 8000 files/directories

SUMMARY rate: (of 3 iterations)
   Operation                     Max            Min           Mean        Std Dev
   ---------                     ---            ---           ----        -------
   Directory creation           5321.004       4987.220       5150.337        167.028
   Directory stat              21876.331      20011.875      20988.001        935.114
   Directory removal            6123.880       5899.102       6001.998        113.400
   File creation                5301.223       4987.101       5120.446        158.904
   File stat                   20334.871      19876.012      20101.339        229.610
   File read                   15120.500      14877.003      15002.660        121.803
   File removal                 6010.302       5801.447       5899.015        104.776
   Tree creation                 612.311        590.200        601.010         11.064
   Tree removal                  401.227        388.910        394.312          6.290
-- finished at 03/05/2024 10:05:41 --
"""

MDTEST_3 = """\
SUMMARY rate: (of 1 iterations)
   Operation                      Max            Min           Mean        Std Dev
   ---------                      ---            ---           ----        -------
   File creation             :       5301.223       5301.223       5301.223          0.000
   File create (stonewall)   :             NA             NA       5188.004             NA
   File stat                 :      20334.871      20334.871      20334.871          0.000
   File read                 :      15120.500      15120.500      15120.500          0.000
   File removal              :       6010.302       6010.302       6010.302          0.000
   Tree creation             :        612.311        612.311        612.311          0.000
   Tree removal              :        401.227        401.227        401.227          0.000

SUMMARY time: (of 1 iterations)
   Operation                      Max            Min           Mean        Std Dev
   File creation             :          1.509          1.509          1.509          0.000
"""


def test_ior_json_summary_of_a_real_run():
    data = (DATA / "posix-fpp.json").read_text()
    run = ior.parse(data)
    assert run.version == "4.0.0"
    # one result per repetition, in order, as IOR measured them
    assert run.bandwidths == {"write": [77.1501, 75.7173, 46.9564],
                              "read": [44.4158, 75.3743, 67.5956]}
    assert run.median("write") == 75.7173
    assert run.spread("write") == (77.1501 - 46.9564) / 75.7173
    # the summary's own max/min/mean are those of the same repetitions
    row = run.summary["write"]
    assert (row["bwMaxMIB"], row["bwMinMIB"]) == (77.1501, 46.9564)
    assert row["bwMeanMIB"] == pytest.approx(sum(run.bandwidths["write"]) / 3, abs=1e-4)


def test_ior_without_results():
    with pytest.raises(ValueError, match="no IOR write results"):
        ior.IorRun("4.0.0", {}, {}).median("write")


def test_mdtest_of_a_real_run_median_of_three_iterations():
    result = ior.parse_mdtest((DATA / "mdtest-shared-dir.out").read_text())
    assert result.iterations == 3
    create = result.rates["File creation"]
    assert create == ior.Rate(1400.829, 1229.631, 1315.445, 85.600)
    # the one of the three that is neither the max nor the min
    assert result.median("File creation") == pytest.approx(1315.875, abs=1e-9)
    assert create.min <= result.median("File creation") <= create.max


def test_mdtest_median_needs_one_or_three_iterations():
    result = ior.parse_mdtest(MDTEST_4.replace("(of 3 iterations)", "(of 4 iterations)"))
    with pytest.raises(ValueError, match="run 3"):
        result.median("File creation")


def test_mdtest_4_summary_rate():
    result = ior.parse_mdtest(MDTEST_4)
    assert result.iterations == 3
    assert len(result.rates) == 9
    assert result.mean("File creation") == 5120.446
    assert result.rates["File stat"] == ior.Rate(20334.871, 19876.012, 20101.339, 229.610)
    assert result.rates["Tree removal"].stddev == 6.290


def test_mdtest_3_colon_rows_and_stonewall_row():
    result = ior.parse_mdtest(MDTEST_3)
    assert result.iterations == 1
    assert sorted(result.rates) == ["File creation", "File read", "File removal", "File stat",
                                    "Tree creation", "Tree removal"]
    # the rate table only: "SUMMARY time" values must not leak in
    assert result.mean("File creation") == 5301.223


def test_mdtest_newer_header_and_perrank_columns():
    text = ("SUMMARY rate (in ops/sec): (of 2 iterations)\n"
            "   Operation     per Rank: Max            Min           Mean      per Iteration: Max            Min           Mean        Std Dev\n"
            "   File creation         700.100        650.200        675.150        5501.000       5400.000       5450.500         71.418\n")
    result = ior.parse_mdtest(text)
    assert result.iterations == 2
    assert result.rates["File creation"] == ior.Rate(5501.0, 5400.0, 5450.5, 71.418)


def test_mdtest_of_a_real_run_on_a_memory_file_system():
    """The CI-sized MdtestScalingCheck's run: 2 ranks, 10,000 files each, on /dev/shm. Its
    creation rate is the kernel's metadata path, some 100x the rate of the same node's ext4
    without a journal (mdtest-shared-dir.out, 200 files each), where each create scanned
    past the inodes freed near it in the last minutes."""
    text = (DATA / "mdtest-shm-shared-dir.out").read_text()
    assert ior.mdtest_problems(text, tasks=2, files_per_task=10000, iterations=3) == []
    result = ior.parse_mdtest(text)
    create = result.rates["File creation"]
    assert create.min <= ior.mdtest_rate(text, "File creation") <= create.max
    disk = ior.parse_mdtest((DATA / "mdtest-shared-dir.out").read_text())
    assert create.min > 50 * disk.rates["File creation"].max
