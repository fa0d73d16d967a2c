"""The lock file every host honours (lib/iostack/core/lease.py): created whole or not at all,
renewed while held, refused to others while its lease runs, taken over only when it is stale,
and never removed from under a new holder."""
import json
import os
import time

import pytest

from iostack.core import lease


def test_held_while_the_block_runs_then_removed(tmp_path):
    lock = tmp_path / ".lock"
    with lease.hold(lock, "prune") as mine:
        on_disk = json.loads(lock.read_text())
        assert on_disk == mine and on_disk["pid"] == os.getpid() and on_disk["what"] == "prune"
        with pytest.raises(lease.Held, match=r"in use by prune on host .* \(pid \d+"):
            with lease.hold(lock, "deploy"):
                pass
        assert json.loads(lock.read_text()) == mine     # the refused one left it alone
    assert not lock.exists()


def test_the_lease_is_renewed_while_held(tmp_path):
    lock = tmp_path / ".lock"
    with lease.hold(lock, "deploy", lease=2.0) as mine:
        first = json.loads(lock.read_text())["lease_until"]
        deadline = time.monotonic() + 5
        while json.loads(lock.read_text())["lease_until"] == first:
            assert time.monotonic() < deadline, "the lease was not renewed"
            time.sleep(0.1)
        assert json.loads(lock.read_text())["token"] == mine["token"]


def test_a_half_written_lock_is_live_while_young_and_stale_after_a_lease(tmp_path, capsys):
    lock = tmp_path / ".lock"
    lock.write_text("")                 # its creator died, or is writing it now
    with pytest.raises(lease.Held, match="cannot be read yet"):
        with lease.hold(lock, "prune"):
            pass
    old = time.time() - lease.LEASE - 10
    os.utime(lock, (old, old))
    with lease.hold(lock, "prune"):
        pass
    assert "took over" in capsys.readouterr().out and not lock.exists()


def test_taking_over_never_removes_a_lock_taken_meanwhile(tmp_path):
    # two hosts judged the same stale lock; one took it over and holds a new one: the other's
    # take-over finds a record it did not judge, and puts it back
    lock = tmp_path / ".lock"
    new = {"host": "b", "pid": 1, "lease_until": "2999-01-01T00:00:00Z", "token": "new"}
    lock.write_text(json.dumps(new))
    assert not lease._take_over(lock, {"host": "a", "token": "stale"})
    assert json.loads(lock.read_text()) == new
    assert [p.name for p in tmp_path.iterdir()] == [".lock"]


def test_a_holder_whose_lock_was_taken_over_leaves_the_new_one(tmp_path, capsys):
    lock = tmp_path / ".lock"
    theirs = {"host": "b", "pid": 1, "lease_until": "2999-01-01T00:00:00Z", "token": "theirs"}
    with lease.hold(lock, "deploy"):
        lock.write_text(json.dumps(theirs))     # our lease ran out and host b took it
    assert json.loads(lock.read_text()) == theirs
    assert "was taken over while this command held it" in capsys.readouterr().err
