"""The reader of Darshan's profiles (iostack_rfm.parsers.darshan) on darshan-parser's own
output of a real run (tests/data/darshan/README.md)."""
import pathlib

import pytest

from iostack_rfm.parsers import darshan

DD = (pathlib.Path(__file__).parents[1] / "data" / "darshan" / "dd-3x4KiB-fsync.total.txt").read_text()


def test_a_real_profile_gives_what_dd_did():
    p = darshan.profile(DD)
    assert p["posix_bytes_written"] == 3 * 4096
    assert p["posix_writes"] == 3 and p["posix_syncs"] == 1 and p["posix_opens"] == 2
    # modules the program did not use count nothing
    assert p["mpiio_bytes_written"] == 0 and p["stdio_writes"] == 0
    assert 0 < p["posix_seconds"] < 1


def test_runs_whose_counts_agree_pass_and_one_extra_write_is_named():
    assert darshan.counts_differ(DD, DD) == []
    more = DD.replace("total_POSIX_WRITES: 3", "total_POSIX_WRITES: 4")
    assert more != DD and darshan.counts_differ(DD, more) == ["posix_writes"]


def test_times_may_differ_between_runs():
    slower = DD.replace("total_POSIX_F_WRITE_TIME: 0.000509", "total_POSIX_F_WRITE_TIME: 0.009")
    assert slower != DD and darshan.counts_differ(DD, slower) == []


def test_output_with_no_totals_is_a_clear_error():
    with pytest.raises(ValueError, match="printed no totals"):
        darshan.profile("# darshan log version: 3.41\n")


def test_bytes_may_differ_between_runs_operations_may_not():
    """A log with times in it writes a byte more or fewer on a loaded node: only the
    operation counts are held to be the same."""
    longer = DD.replace("total_POSIX_BYTES_WRITTEN: 12288", "total_POSIX_BYTES_WRITTEN: 12289")
    assert longer != DD and darshan.counts_differ(DD, longer) == []


def test_a_builds_recorded_counts_are_held_exactly_and_each_move_is_named():
    recorded = darshan.gated(DD)
    assert recorded == {"posix_writes": 3, "posix_reads": 0, "posix_opens": 2,
                        "posix_syncs": 1, "mpiio_writes": 0, "stdio_writes": 0}
    assert darshan.moved(recorded, DD) == []
    extra_sync = DD.replace("total_POSIX_FSYNCS: 1", "total_POSIX_FSYNCS: 2")
    assert extra_sync != DD
    assert darshan.moved(recorded, extra_sync) == ["posix_syncs: 2 against 1"]
    # a count the reference lacks counts from 0
    assert darshan.moved({**recorded, "posix_writes": 0}, DD) == ["posix_writes: 3 against 0"]


COPY = (pathlib.Path(__file__).parents[1] / "data" / "darshan"
        / "dd-copy-bs100.total-file.txt").read_text()


def test_access_sizes_and_files_of_a_real_copy():
    p = darshan.profile(COPY)
    assert p["posix_writes"] == 123 and p["posix_reads"] == 124
    assert p["posix_bytes_written"] == 12288
    # 122 writes of 100 bytes and one of 88: all in Darshan's 0-100 bucket
    assert p["posix_writes_sized_0_100"] == 123 and p["posix_writes_sized_100_1k"] == 0
    assert (p["posix_files"], p["posix_files_written"]) == (2, 1)
    assert p["stdio_files"] == 0 and p["mpiio_files"] == 0
    # without --file's lines the files count 0 (what a --total-only profile gave)
    assert darshan.profile(DD)["posix_files"] == 0
