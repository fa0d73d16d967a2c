"""The mount a path is on, where mounts are stacked on its mount point."""
import json
import subprocess

from iostack.core import filesystems, process

# findmnt --target for an image mounted over the tmpfs that hides the tree it was built in
STACKED = {"filesystems": [
    {"target": "/srv/iostack", "source": "hidden", "fstype": "tmpfs"},
    {"target": "/srv/iostack", "source": "squashfuse", "fstype": "fuse.squashfuse"}]}


def test_the_top_of_stacked_mounts_holds_the_path(monkeypatch, tmp_path):
    monkeypatch.setattr(process, "capture", lambda cmd, **kw: subprocess.CompletedProcess(
        cmd, 0, json.dumps(STACKED), ""))
    assert filesystems.mount_of(tmp_path) == ("/srv/iostack", "squashfuse", "fuse.squashfuse")


def test_a_path_findmnt_cannot_place_is_on_an_unknown_root(monkeypatch, tmp_path):
    monkeypatch.setattr(process, "capture", lambda cmd, **kw: subprocess.CompletedProcess(
        cmd, 1, "", "findmnt: failed"))
    assert filesystems.mount_of(tmp_path) == ("/", "?", "?")


def test_an_image_is_read_only_whatever_its_mount_flags_say(monkeypatch, tmp_path):
    """squashfuse mounts rw, and access(2) lets root write there: the file system type says."""
    monkeypatch.setattr(process, "capture", lambda cmd, **kw: subprocess.CompletedProcess(
        cmd, 0, json.dumps(STACKED), ""))
    assert filesystems.read_only(tmp_path)
    below = {"filesystems": STACKED["filesystems"][:1]}
    monkeypatch.setattr(process, "capture", lambda cmd, **kw: subprocess.CompletedProcess(
        cmd, 0, json.dumps(below), ""))
    assert not filesystems.read_only(tmp_path)
