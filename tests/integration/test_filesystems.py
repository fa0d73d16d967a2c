"""Which file system holds a path, and when it counts as full (iostack.core.filesystems,
through findmnt)."""
import pathlib

from iostack.core import filesystems


def test_a_file_system_is_full_below_a_margin_and_named_by_its_mount(tmp_path):
    mount = filesystems.mount_of(tmp_path / "not" / "yet")    # its nearest existing parent
    assert str(tmp_path).startswith(mount.mountpoint)
    assert filesystems.full(tmp_path, below=0) is None
    message = filesystems.full(tmp_path / "x", below=1 << 62)
    assert message.startswith(f"file system {mount} holding {tmp_path / 'x'} is full: ")
    # findmnt's answer is the kernel's: the same device as the path's
    assert pathlib.Path(mount.mountpoint).stat().st_dev == tmp_path.stat().st_dev
