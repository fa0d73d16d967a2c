"""`bin/iostack releases diff A B` (lib/iostack/deployment/releasediff.py) on the locks
releases keep: the committed locks of the local site and its nwp environment, and the local
lock changed the ways a new release changes it (a newer eckit, so FDB and metkit rebuilt; a
package dropped; one added)."""
import copy
import json

from iostack.core import paths
from iostack.deployment import releasediff, releases

LOCAL = paths.REPO / "spack-env" / "sites" / "local" / "spack.lock"
NWP = paths.REPO / "spack-env" / "sites" / "local" / "nwp" / "spack.lock"


def make_release(root, rid, lock: dict | None, env="local"):
    path = root / "releases" / rid
    path.mkdir(parents=True)
    if lock is not None:
        (path / "spack.lock").write_text(json.dumps(lock))
    (path / "release.json").write_text(json.dumps(
        {"id": rid, "site": "local", "env": env, "created": rid[:16], "regression": "passed"}))
    return releases.load(path)


def named(lock, name):
    return next((h, s) for h, s in lock["concrete_specs"].items() if s["name"] == name)


def rehash(lock, old_hash, new_hash):
    """Give a spec a new hash, as Spack would, and point its dependents at it."""
    specs = lock["concrete_specs"]
    specs[new_hash] = specs.pop(old_hash)
    for spec in specs.values():
        for dep in spec.get("dependencies", []):
            if dep["hash"] == old_hash:
                dep["hash"] = new_hash


def a_newer_release_lock():
    lock = json.loads(LOCAL.read_text())
    new = copy.deepcopy(lock)
    eckit_hash, eckit = named(new, "eckit")
    eckit["version"] = "1.29.0"
    rehash(new, eckit_hash, "e" * 32)
    for name, letter in (("metkit", "m"), ("fdb", "f")):     # their dependency moved
        rehash(new, named(new, name)[0], letter * 32)
    del new["concrete_specs"][named(new, "nvme-stage")[0]]
    new["concrete_specs"]["d" * 32] = {"name": "adios2", "version": "2.10.2",
                                       "dependencies": []}
    return lock, new


def test_a_newer_eckit_rebuilds_what_links_it_and_a_dropped_and_an_added_package_show():
    old, new = a_newer_release_lock()
    changes, unchanged = releasediff.compare(old["concrete_specs"], new["concrete_specs"])
    assert [c.line() for c in changes] == [
        "added      adios2 2.10.2",
        "upgraded   eckit 1.28.8 -> 1.29.0",
        f"rebuilt    fdb 5.13.106  ({named(old, 'fdb')[0][:7]} -> fffffff; dependencies "
        "changed: eckit, metkit)",
        f"rebuilt    metkit 1.11.22  ({named(old, 'metkit')[0][:7]} -> mmmmmmm; dependencies "
        "changed: eckit)",
        "removed    nvme-stage 1.1.0"]
    # every other package of the 31 specs' names is the same, hash for hash
    names = {s["name"] for s in old["concrete_specs"].values()}
    assert unchanged == len(names) - 4


def test_the_local_and_nwp_locks_differ_by_openifs_and_what_it_needs():
    changes, _ = releasediff.compare(json.loads(LOCAL.read_text())["concrete_specs"],
                                     json.loads(NWP.read_text())["concrete_specs"])
    added = {c.name for c in changes if c.kind == "added"}
    assert {"openifs", "ecmwf-atlas", "fckit", "nwp-env"} <= added
    assert not [c for c in changes if c.kind == "removed"]


def test_a_downgrade_and_a_rebuild_with_the_same_dependencies_say_so():
    old = {"a" * 32: {"name": "fdb", "version": "5.13.106", "dependencies": []},
           "b" * 32: {"name": "io500", "version": "2023.bb08c87", "dependencies": []},
           "c" * 32: {"name": "eckit", "version": "1.28.8", "dependencies": []}}
    new = {"x" * 32: {"name": "fdb", "version": "5.13.106", "dependencies": []},
           "y" * 32: {"name": "io500", "version": "2024.0ab1c2d", "dependencies": []},
           "z" * 32: {"name": "eckit", "version": "1.20.2", "dependencies": []}}
    changes, unchanged = releasediff.compare(old, new)
    assert [c.line() for c in changes] == [
        "downgraded eckit 1.28.8 -> 1.20.2",
        "rebuilt    fdb 5.13.106  (aaaaaaa -> xxxxxxx; its recipe, variants or flags changed)",
        "changed    io500 2023.bb08c87 -> 2024.0ab1c2d"]
    assert unchanged == 0


def test_the_cli_prints_the_diff_and_names_a_missing_release_in_one_line(tmp_path, iostack):
    old, new = a_newer_release_lock()
    a = make_release(tmp_path, "20260101T000000Z-aaaaaaaaaa-1111111111", old)
    b = make_release(tmp_path, "20260201T000000Z-bbbbbbbbbb-2222222222", new)
    p = iostack("releases", "diff", a.id, b.id, "--root", tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == f"releases diff {a.id} -> {b.id}"
    assert "upgraded   eckit 1.28.8 -> 1.29.0" in lines and lines[-1].startswith("unchanged  ")
    # the same release twice: nothing changed
    same = iostack("releases", "--root", tmp_path, "diff", b.id, b.id)
    assert same.returncode == 0 and same.stdout.strip().endswith("packages, hash for hash")
    missing = iostack("releases", "diff", a.id, "20990101T000000Z-nope", "--root", tmp_path)
    assert missing.returncode != 0 and missing.stdout == ""
    assert missing.stderr.splitlines() == [
        f"iostack: error: no release '20990101T000000Z-nope' in {tmp_path}/releases "
        f"(releases: {a.id}, {b.id})"]


def test_a_release_without_a_lock_is_one_line(tmp_path, iostack):
    a = make_release(tmp_path, "20260101T000000Z-aaaaaaaaaa-1111111111", None)
    b = make_release(tmp_path, "20260201T000000Z-bbbbbbbbbb-2222222222", json.loads(LOCAL.read_text()))
    p = iostack("releases", "diff", a.id, b.id, "--root", tmp_path)
    assert p.returncode != 0
    assert p.stderr.splitlines() == [f"iostack: error: release {a.id} has no spack.lock "
                                     f"({a.path}/spack.lock), so nothing to compare"]
