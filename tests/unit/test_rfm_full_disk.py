"""The checks' full-disk sanity step: a job's output that says a tool was stopped on a full
file system, or that printed ENOSPC, becomes a failure naming it (iostack_rfm.base)."""
from iostack_rfm.base import full_disk_problem

DF = "/dev/loop5           40939 38053      {free}      96% /tmp/rb/tiny"


def test_a_tool_stopped_on_a_full_file_system_names_it():
    out = f"fdb-read request rc=0\niostack-stopped: fdb-read after 30 s; df: {DF.format(free=1903)}\n"
    assert full_disk_problem(out, "local:default") == (
        "file system /tmp/rb/tiny (/dev/loop5) on local:default is full: 1903 KiB free when "
        "fdb-read was stopped after 30 s; free space there and run again")


def test_a_tool_stopped_with_space_left_is_named_as_stopped():
    out = f"iostack-stopped: fdb-write after 600 s; df: {DF.format(free=900000)}\n"
    assert full_disk_problem(out, "local:default") == "fdb-write was stopped after 600 s (tool_timeout)"


def test_enospc_in_the_output_is_named_and_a_clean_output_is_not():
    out = "gribgen: messages=42\ncp: error writing 'x.grib': No space left on device\n"
    assert full_disk_problem(out, "cray-ex:compute") == (
        "the job ran out of space (ENOSPC) on cray-ex:compute: cp: error writing 'x.grib': "
        "No space left on device")
    assert full_disk_problem("gribgen: messages=42\nRESULT=IDENTICAL\n", "local:default") is None


def test_a_file_system_is_full_below_a_margin_and_named_by_its_mount(tmp_path):
    from iostack.core import filesystems

    mount = filesystems.mount_of(tmp_path / "not" / "yet")    # its nearest existing parent
    assert str(tmp_path).startswith(mount.mountpoint)
    assert filesystems.full(tmp_path, below=0) is None
    message = filesystems.full(tmp_path / "x", below=1 << 62)
    assert message.startswith(f"file system {mount} holding {tmp_path / 'x'} is full: ")
