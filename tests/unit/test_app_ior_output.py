"""IOR and mdtest output parsing. Samples are made up, laid out with the printf formats of
IOR 4.0 (ior-output.c) and mdtest 4.0 / 3.3 (mdtest.c)."""
import pytest

from iostack_rfm import ior

IOR_OUTPUT = """\
IOR-4.0.0: MPI Coordinated Test of Parallel I/O
Began               : Tue Mar  5 10:00:01 2024
Command line        : ior -a POSIX -F -C -e -b 1g -t 1m -i 3 -o /lustre/scratch/ior/testfile
Machine             : Linux cn001
TestID              : 0
StartTime           : Tue Mar  5 10:00:01 2024
Path                : /lustre/scratch/ior/testfile.00000000
FS                  : 1.2 PiB   Used FS: 41.0%   Inodes: 800.0 Mi   Used Inodes: 12.3%

Options:
api                 : POSIX
apiVersion          :
test filename       : /lustre/scratch/ior/testfile
access              : file-per-process
type                : independent
segments            : 1
ordering in a file  : sequential
ordering inter file : constant task offset
task offset         : 1
nodes               : 2
tasks               : 8
clients per node    : 4
repetitions         : 3
xfersize            : 1 MiB
blocksize           : 1 GiB
aggregate filesize  : 8 GiB

Results:

access    bw(MiB/s)  IOPS       Latency(s)  block(KiB) xfer(KiB)  open(s)    wr/rd(s)   close(s)   total(s)   iter
------    ---------  ----       ----------  ---------- ---------  --------   --------   --------   --------   ----
write     2345.67    2346.10    0.003401    1048576    1024.00    0.000412   3.49       0.012      3.49       0
read      4567.89    4569.02    0.001747    1048576    1024.00    0.000198   1.79       0.004      1.79       0
Max Write: 2345.67 MiB/sec (2459.61 MB/sec)
Max Read:  4567.89 MiB/sec (4789.78 MB/sec)

Summary of all tests:
Operation   Max(MiB)   Min(MiB)  Mean(MiB)     StdDev   Max(OPs)   Min(OPs)  Mean(OPs)     StdDev    Mean(s) Stonewall(s) Stonewall(MiB) Test# #Tasks tPN reps fPP reord reordoff reordrand seed segcnt   blksiz    xsize aggs(MiB)   API RefNum
write        2345.67    2101.10    2230.53     100.21    2345.67    2101.10    2230.53     100.21    3.67410         NA            NA     0      8   4    3   1     1        1         0    0      1 1073741824  1048576    8192.0 POSIX      0
read         4567.89    4401.32    4490.01      68.35    4567.89    4401.32    4490.01      68.35    1.82451         NA            NA     0      8   4    3   1     1        1         0    0      1 1073741824  1048576    8192.0 POSIX      0
Finished            : Tue Mar  5 10:00:41 2024
"""

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


def test_ior_max_lines_and_summary_table():
    result = ior.parse(IOR_OUTPUT)
    assert result.max_write_mib_per_s == 2345.67
    assert result.max_read_mib_per_s == 4567.89
    assert [r.operation for r in result.summary] == ["write", "read"]
    write = result.rows("write")[0]
    assert write.max_mib_per_s == 2345.67 and write.mean_mib_per_s == 2230.53
    assert write.tasks == 8
    assert write.number("StdDev(MiB)") == 100.21 and write.number("StdDev(OPs)") == 100.21
    assert write.number("Stonewall(s)") is None
    assert write.columns["API"] == "POSIX" and write.number("blksiz") == 1 << 30
    # 8 GiB moved at the mean rate takes the mean time
    assert write.number("aggs(MiB)") / write.mean_mib_per_s == pytest.approx(write.number("Mean(s)"), rel=1e-3)


def test_ior_summary_row_must_fit_header():
    broken = IOR_OUTPUT.replace("POSIX      0\nread", "POSIX\nread")
    with pytest.raises(ValueError, match="columns"):
        ior.parse(broken)


def test_ior_without_summary():
    result = ior.parse(IOR_OUTPUT.split("\nSummary of all tests:")[0])
    assert result.summary == [] and result.max_read_mib_per_s == 4567.89


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
