"""The FDB throughput check's readers (iostack_rfm.parsers.fdb): the sync audit on strace logs as
strace 6.1 writes them for fio 3.33 and FDB 5.10.8 on this node (pids, `<unfinished ...>`
and `<... resumed>` halves, signals), the like-for-like rates, CPU per GiB, the best writer
count."""
import json

import pytest

from iostack_rfm.parsers import fdb

# fio --fdatasync=3 --end_fsync=1, two jobs of 6 and 9 fields (strace -f -qq -y)
FIO_FLUSH = """\
1903  fdatasync(7</scratch/raw-w0.0.0> <unfinished ...>
1904  fdatasync(7</scratch/raw-w1.0.0> <unfinished ...>
1903  <... fdatasync resumed>)          = 0
1904  <... fdatasync resumed>)          = 0
1903  fsync(7</scratch/raw-w0.0.0> <unfinished ...>
1904  fdatasync(7</scratch/raw-w1.0.0> <unfinished ...>
1903  <... fsync resumed>)              = 0
1904  <... fdatasync resumed>)          = 0
1897  --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=1903, si_uid=0, si_status=0} ---
1904  fsync(7</scratch/raw-w1.0.0>) = 0
"""
# one FDB writer, 2 flushes, FDB_DATA_SYNC_ON_FLUSH=1
FDB_FLUSH = """\
4814  fsync(5</scratch/fdb-root/od:0001/20240101:0000:g/enfo/schema.20261123.013134.vm.2067>) = 0
4814  fsync(6</scratch/fdb-root/od:0001/20240101:0000:g/enfo>) = 0
4814  fdatasync(3</scratch/fdb-root/od:0001/20240101:0000:g/enfo/toc>) = 0
4814  fdatasync(4</scratch/fdb-root/od:0001/20240101:0000:g/enfo/pf:pl.20261123.013134.vm.2069.data>) = 0
4814  fdatasync(3</scratch/fdb-root/od:0001/20240101:0000:g/enfo/pf:pl.20261123.013134.vm.2068.index>) = 0
4814  fdatasync(5</scratch/fdb-root/od:0001/20240101:0000:g/enfo/toc>) = 0
4814  fdatasync(4</scratch/fdb-root/od:0001/20240101:0000:g/enfo/pf:pl.20261123.013134.vm.2069.data>) = 0
4814  fdatasync(3</scratch/fdb-root/od:0001/20240101:0000:g/enfo/pf:pl.20261123.013134.vm.2068.index>) = 0
4814  fdatasync(5</scratch/fdb-root/od:0001/20240101:0000:g/enfo/toc>) = 0
"""
# the same with FDB_ASYNC_WRITE=1: index and toc synced, the data never
FDB_ASYNC = "\n".join(line for line in FDB_FLUSH.splitlines() if ".data>" not in line)
SYNCFS = "13018 syncfs(3</scratch>) = 0\n"


def test_sync_calls_count_each_call_once_with_its_file():
    calls = fdb.sync_calls(FIO_FLUSH)
    assert calls == {("fdatasync", "/scratch/raw-w0.0.0"): 1, ("fsync", "/scratch/raw-w0.0.0"): 1,
                     ("fdatasync", "/scratch/raw-w1.0.0"): 2, ("fsync", "/scratch/raw-w1.0.0"): 1}
    assert fdb.data_syncs_per_file(calls) == [2, 3]
    assert fdb.data_syncs_per_file(fdb.sync_calls(FDB_FLUSH)) == [2]
    assert fdb.file_system_syncs(fdb.sync_calls(SYNCFS)) == 1


def test_file_kinds():
    kinds = [fdb.file_kind(p) for _, p in fdb.sync_calls(FDB_FLUSH)]
    assert sorted(set(kinds)) == ["data", "index", "other", "toc"]


def test_sync_flush_needs_one_data_sync_per_flush_on_both_sides():
    # two fio jobs of 2 and 3 flushes; two FDB writers of as many flushes
    second = FDB_FLUSH.replace("2069.data", "3069.data")
    second += second.splitlines()[-3] + "\n"
    assert fdb.sync_problems([FIO_FLUSH], [FDB_FLUSH, second], durability="sync-flush",
                             flushes=[2, 3]) == []


def test_a_variant_that_does_not_sync_its_data_fails_the_sync_flush_audit():
    problems = fdb.sync_problems([FIO_FLUSH], [FDB_ASYNC], durability="sync-flush",
                                 flushes=[2, 3])
    assert problems == ["fdb: data syncs per file [], expected [2, 3] (sync-flush)"]


def test_end_variants_need_no_data_sync_and_one_syncfs_each():
    assert fdb.sync_problems([""], [FDB_ASYNC], SYNCFS, SYNCFS, durability="async-end",
                             flushes=[2]) == []
    # FDB's data synced although the variant says it is not; the raw side's end missing
    problems = fdb.sync_problems([""], [FDB_FLUSH], "", SYNCFS, durability="sync-end",
                                 flushes=[2])
    assert problems == ["raw: 0 syncfs at the end, expected 1",
                        "fdb: data syncs per file [2], expected [] (sync-end)"]
    # a syncfs while writing is not an end sync
    assert fdb.sync_problems([SYNCFS], [FDB_ASYNC], SYNCFS, SYNCFS, durability="sync-end",
                             flushes=[2]) == ["raw: 1 file-system syncs while writing"]


def test_every_variant_claims_a_durability_its_raw_write_matches():
    assert set(fdb.DURABILITY) == {"sync-flush", "sync-end", "async-end"}
    # asynchronous writes sync no data: no variant may promise a data sync with them
    assert all(not v["data_sync_on_flush"] for v in fdb.DURABILITY.values() if v["async_write"])
    assert [k for k, v in fdb.DURABILITY.items() if not v["end_sync"]] == ["sync-flush"]


def fio_json(*jobs):
    return json.dumps({"jobs": [{"jobname": f"raw-w{i}", "write": {"io_bytes": b, "runtime": ms}}
                                for i, (b, ms) in enumerate(jobs)]})


def writer(bytes_, seconds):
    return (f"Path: key\nFields written: 3\nBytes written: {bytes_}\nFlushes: 1\n"
            f"Writing duration: {seconds}\n")


MiB = 1024 * 1024


def test_rates_are_all_bytes_over_the_slowest_writer_plus_the_end_sync():
    raw = fio_json((100 * MiB, 1000), (100 * MiB, 2000))
    assert fdb.raw_rate(raw) == pytest.approx(100.0)
    assert fdb.raw_rate(raw, "real=2.000 user=0.000 sys=0.001") == pytest.approx(50.0)
    outs = [writer(100 * MiB, 4.0), writer(100 * MiB, 1.0)]
    assert fdb.fdb_rate(outs) == pytest.approx(50.0)
    assert fdb.fdb_rate(outs, "real=1.000 user=0 sys=0") == pytest.approx(40.0)


def test_figures_are_medians_of_each_repetitions_pair():
    raws = [fio_json((100 * MiB, 1000)), fio_json((100 * MiB, 500)), fio_json((100 * MiB, 1000))]
    outs = [[writer(100 * MiB, 2.0)], [writer(100 * MiB, 2.0)], [writer(100 * MiB, 1.0)]]
    figures = fdb.write_figures(raws, outs, [], [])
    # pairs: (50, 100), (50, 200), (100, 100): ratios 0.5, 0.25, 1.0; spreads beside
    assert figures == pytest.approx({"fdb_write_bw": 50.0, "raw_write_bw": 100.0,
                                     "fdb_write_ratio": 0.5,
                                     "fdb_write_ratio_spread": (1.0 - 0.25) / 0.5,
                                     "fdb_write_bw_spread": (100 - 50) / 50})
    with pytest.raises(ValueError):
        fdb.write_figures(raws, outs[:2], [], [])


def test_cpu_per_gib_counts_every_writer_process():
    outs = [writer(512 * MiB, 1.0), writer(512 * MiB, 1.0)]
    times = ["real=2.0 user=1.25 sys=0.25", "real=2.0 user=1.0 sys=0.5"]
    assert fdb.cpu_per_gib(outs, times) == pytest.approx(3.0)
    assert fdb.median_cpu_per_gib([outs, outs], [times, times]) == pytest.approx(3.0)
    with pytest.raises(ValueError):
        fdb.times("0.01user 0.00system")


def test_written_bytes_are_compared_writer_by_writer():
    assert fdb.written_bytes_problems(fio_json((6, 1), (9, 1)), [writer(6, 1), writer(9, 1)]) == []
    assert fdb.written_bytes_problems(fio_json((9, 1), (6, 1)), [writer(6, 1), writer(9, 1)]) == [
        "fio jobs wrote [9, 6] bytes, FDB writers archived [6, 9]"]


def test_best_writer_count_prefers_fewer_writers_on_a_tie():
    assert fdb.best_writers([1, 2, 4], [0.5, 0.9, 0.9]) == (2, 0.9)
    assert fdb.best_writers([1, 2], [0.7, 0.6]) == (1, 0.7)


def test_seconds_per_field_are_the_slowest_writers_share_and_its_excess_over_raw():
    # writer() archives 3 fields: 3 s for 3 fields is 1e6 us per field; raw 1.5 s for the
    # same bytes is 0.5e6 us per field, so 0.5e6 us of excess
    raws = [fio_json((100 * MiB, 1500)), fio_json((100 * MiB, 1000)), fio_json((100 * MiB, 3000))]
    outs = [[writer(100 * MiB, 3.0)], [writer(100 * MiB, 6.0)], [writer(100 * MiB, 1.5)]]
    figures = fdb.seconds_per_field(raws, outs, [], [])
    # per pass: (1e6, 0.5e6), (2e6, 5/3e6), (0.5e6, -0.5e6): medians
    assert figures == pytest.approx({"us_per_field": 1e6, "overhead_us_per_field": 0.5e6})
    # an end sync counts on both sides
    figures = fdb.seconds_per_field(raws[:1], outs[:1], ["real=0.300 user=0 sys=0"],
                                    ["real=3.000 user=0 sys=0"])
    assert figures == pytest.approx({"us_per_field": 2e6, "overhead_us_per_field": 1.4e6})


# `strace -f -c` of fdb-archive-bench --path key (FDB 5.10.8, strace 6.1), 2 and 4 steps of
# 7 fields: rows of the real tables, the total row included
STRACE_2 = """\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ------------------
 75.22    0.019566        1630        12           write
  6.46    0.001680         240         7           fdatasync
  6.25    0.001626           6       236           mmap
  2.66    0.000693           4       148        16 openat
  1.21    0.000315           2       131           close
  0.16    0.000042           2        21           lseek
  0.15    0.000038          19         2           fsync
------ ----------- ----------- --------- --------- ------------------
100.00    0.026010          17      557       16 total
"""
STRACE_4 = """\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ------------------
 79.83    0.024825        1241        20           write
  4.79    0.001488         114        13           fdatasync
  1.59    0.000493           3       152        16 openat
  1.19    0.000371           1       236           mmap
  0.78    0.000243           1       135           close
  0.17    0.000053           1        31           lseek
  0.00    0.000000           0         2           fsync
------ ----------- ----------- --------- --------- ------------------
100.00    0.031097          19      589       16 total
"""


def test_strace_summary_reads_calls_by_name_without_the_total():
    assert fdb.strace_summary(STRACE_2) == {"write": 12, "fdatasync": 7, "mmap": 236,
                                            "openat": 148, "close": 131, "lseek": 21, "fsync": 2}


def test_profile_figures_are_the_cost_of_one_more_field():
    small, big = writer(1, 1).replace("3", "14", 1), writer(1, 1).replace("3", "28", 1)
    figures = fdb.profile_figures(small, STRACE_2, big, STRACE_4,
                                  small, "minflt=3700 majflt=1 nvcsw=10 nivcsw=2\n",
                                  big, "minflt=3728 majflt=1 nvcsw=20 nivcsw=2\n")
    # 14 more fields: 8 writes, 6 fdatasyncs, 4 opens, 4 closes, 10 lseeks; mmap and fsync
    # are start-up's (the same in both)
    assert figures == pytest.approx({
        "syscalls_per_field": 32 / 14, "page_faults_per_field": 2.0, "write_per_field": 8 / 14,
        "fdatasync_per_field": 6 / 14, "fsync_per_field": 0.0, "openat_per_field": 4 / 14,
        "close_per_field": 4 / 14, "lseek_per_field": 10 / 14})


def test_a_profile_without_more_fields_in_its_second_pass_is_an_error():
    same = writer(1, 1)
    with pytest.raises(ValueError, match="no more fields"):
        fdb.per_field(same, {"write": 1}, same, {"write": 2})
    with pytest.raises(ValueError, match="no rusage"):
        fdb.rusage("0.01user 0.00system")
