"""A lock is stale when what it concretizes differs, not when Spack came another way."""
import copy

from iostack.spack import locks

LOCK = {
    "spack": {"type": "git", "commit": "2e907202bcc8209a6a62243aab50c179b524cc3b", "version": "1.1.0"},
    "roots": [{"spec": "fdb", "hash": "aaaa"}],
    "concrete_specs": {"aaaa": {"name": "fdb", "version": "5.13.106"}},
}


def test_a_release_tarball_spack_does_not_make_a_lock_stale():
    from_tarball = copy.deepcopy(LOCK)
    from_tarball["spack"] = {"type": "release", "version": "1.1.0"}
    assert locks.differences(LOCK, from_tarball) == []


def test_a_changed_concretization_does():
    changed = copy.deepcopy(LOCK)
    changed["roots"] = [{"spec": "fdb", "hash": "bbbb"}]
    changed["concrete_specs"] = {"bbbb": {"name": "fdb", "version": "5.10.8"}}
    assert locks.differences(LOCK, changed) == [
        "root fdb: aaaa -> bbbb", "gone fdb@5.13.106/aaaa", "new fdb@5.10.8/bbbb"]
