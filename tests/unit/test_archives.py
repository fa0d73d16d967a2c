"""Unpacking refuses what would land or point outside its destination (iostack.core.archives),
whichever of tarfile's `data` filter or its own checks this Python uses: both are tested,
the fallback directly even where this Python has the filter."""
import io
import os
import stat
import tarfile

import pytest

from iostack.core import archives

#: the two ways in: what this Python's extract() takes, and the fallback itself
EXTRACTORS = {"extract": lambda tar, dest: archives.extract(tar, dest),
              "fallback": lambda tar, dest: archives.extract_checked(tar, dest, tar.getmembers())}


def archive_with(path, *members):
    """A tar at `path` of (name, kind, link target) members: files hold b'x'; kind is
    file, link (symbolic), hard or dir."""
    with tarfile.open(path, "w") as tar:
        for name, kind, target in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = 1
                tar.addfile(info, io.BytesIO(b"x"))
                continue
            if kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, target
            else:
                info.type = tarfile.SYMTYPE if kind == "link" else tarfile.LNKTYPE
                info.linkname = target
            tar.addfile(info)
    return path


@pytest.mark.parametrize("how", EXTRACTORS)
def test_a_sound_archive_unpacks(tmp_path, how):
    path = archive_with(tmp_path / "ok.tar", ("top", "dir", 0o555), ("top/a", "file", None),
                        ("top/b", "link", "a"), ("top/c", "hard", "top/a"))
    with tarfile.open(path) as tar:
        EXTRACTORS[how](tar, tmp_path / "out")
    assert (tmp_path / "out/top/a").read_bytes() == b"x"
    assert (tmp_path / "out/top/b").resolve() == (tmp_path / "out/top/a").resolve()
    assert (tmp_path / "out/top/c").stat().st_ino == (tmp_path / "out/top/a").stat().st_ino
    # a read-only directory gets its mode once its members are in
    assert stat.S_IMODE((tmp_path / "out/top").stat().st_mode) == 0o555


# Each archive is an attack on the checks; `escaped` beside the destination is its target.
ATTACKS = {
    "dot-dot member": [("../escaped", "file", None)],
    "link outside": [("top/evil", "link", "../../escaped")],
    # the confirmed escape: `x` is harmless as a name, and `x/../escaped` resolves
    # inside while `x` does not exist yet; once `x -> .` is on disk, `x/..` is outside
    "two members: x -> ., x/../escaped": [("x", "link", "."), ("x/../escaped", "file", None)],
    # the same through a link's target, then a hard link to a file outside
    "link through an earlier link": [("x", "link", "."), ("y", "link", "x/.."),
                                     ("y/escaped", "file", None)],
    "hard link through an earlier link": [("x", "link", "."), ("h", "hard", "x/../outside")],
    # a link that was inside when written, and points outside once a later member exists
    "link redirected by a later member": [("y", "link", "z/.."), ("z", "link", ".")],
}


@pytest.mark.parametrize("how", EXTRACTORS)
@pytest.mark.parametrize("attack", ATTACKS)
def test_a_member_outside_is_refused_and_nothing_escapes(tmp_path, how, attack):
    (tmp_path / "outside").write_bytes(b"secret")
    path = archive_with(tmp_path / "bad.tar", *ATTACKS[attack])
    with tarfile.open(path) as tar, pytest.raises(archives.UnsafeArchive, match="outside"):
        EXTRACTORS[how](tar, tmp_path / "out")
    assert not (tmp_path / "escaped").exists()
    assert set(os.listdir(tmp_path)) - {"out"} == {"bad.tar", "outside"}
    assert (tmp_path / "outside").read_bytes() == b"secret"
