"""Unpacking refuses what would land or point outside its destination (iostack.core.archives),
whichever of tarfile's `data` filter or its own checks this Python uses."""
import io
import tarfile

import pytest

from iostack.core import archives


def archive_with(path, *members):
    """A tar at `path` of (name, kind, link target) members: files hold b'x'."""
    with tarfile.open(path, "w") as tar:
        for name, kind, target in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = 1
                tar.addfile(info, io.BytesIO(b"x"))
            else:
                info.type, info.linkname = tarfile.SYMTYPE, target
                tar.addfile(info)
    return path


def test_a_sound_archive_unpacks(tmp_path):
    path = archive_with(tmp_path / "ok.tar", ("top/a", "file", None), ("top/b", "link", "a"))
    with tarfile.open(path) as tar:
        archives.extract(tar, tmp_path / "out")
    assert (tmp_path / "out/top/a").read_bytes() == b"x"
    assert (tmp_path / "out/top/b").resolve() == (tmp_path / "out/top/a").resolve()


@pytest.mark.parametrize("member", [("../escaped", "file", None),
                                    ("top/evil", "link", "../../escaped")])
def test_a_member_outside_is_refused_and_nothing_escapes(tmp_path, member):
    path = archive_with(tmp_path / "bad.tar", member)
    with tarfile.open(path) as tar, pytest.raises(archives.UnsafeArchive, match="outside"):
        archives.extract(tar, tmp_path / "out")
    assert not (tmp_path / "escaped").exists()
