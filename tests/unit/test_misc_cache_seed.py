"""runner.seed_builtin_indexes: a new checkout's Spack misc cache starts with the builtin
repository's indexes from another of the same Spack and spack-packages (its own
repository's are left for Spack to make), and never from another spack-packages."""
import json
import os

from iostack.spack import runner


def made(parent, name, spack, pkgs, kinds=runner.INDEX_KINDS):
    misc = parent / name
    misc.mkdir(parents=True)
    (misc / runner.MISC_SOURCES).write_text(json.dumps({"spack": str(spack),
                                                         "spack_packages": str(pkgs)}))
    for kind in kinds:
        (misc / kind).mkdir()
        for ns in ("builtin", "iostack"):
            index = misc / kind / f"{ns}-specfile_v5-index.json"
            index.write_text(f"{name} {ns} {kind}")
            os.utime(index, (1_000_000, 1_000_000))
    return misc


def test_the_builtin_indexes_come_from_a_cache_of_the_same_trees(tmp_path):
    spack, pkgs = tmp_path / "spack", tmp_path / "pkgs"
    spack.mkdir(), pkgs.mkdir()
    parent = tmp_path / "spack-misc"
    made(parent, "a-other-packages", spack, tmp_path / "elsewhere")
    made(parent, "b-same", spack, pkgs)
    new = parent / "c-new"
    runner.seed_builtin_indexes(new, spack, pkgs)
    for kind in runner.INDEX_KINDS:
        index = new / kind / "builtin-specfile_v5-index.json"
        assert index.read_text() == f"b-same builtin {kind}"
        assert index.stat().st_mtime == 1_000_000      # Spack judges an index by its time
        assert not (new / kind / "iostack-specfile_v5-index.json").exists()
        assert sorted(p.name for p in (new / kind).iterdir()) == [index.name]
    assert json.loads((new / runner.MISC_SOURCES).read_text()) == {
        "spack": str(spack.resolve()), "spack_packages": str(pkgs.resolve())}


def test_with_no_cache_of_the_same_trees_nothing_is_seeded(tmp_path):
    spack, pkgs = tmp_path / "spack", tmp_path / "pkgs"
    spack.mkdir(), pkgs.mkdir()
    parent = tmp_path / "spack-misc"
    made(parent, "a-other-spack", tmp_path / "spack2", pkgs)
    new = parent / "new"
    runner.seed_builtin_indexes(new, spack, pkgs)
    assert sorted(p.name for p in new.iterdir()) == [runner.MISC_SOURCES]


def test_misc_cache_seeds_a_new_directory_once(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(runner, "seed_builtin_indexes", lambda *a: calls.append(a))

    class S:
        state = tmp_path
    first = runner.misc_cache(S, tmp_path / "spack", tmp_path / "pkgs")
    assert len(calls) == 1 and calls[0][0] == first
    first.mkdir(parents=True)
    assert runner.misc_cache(S, tmp_path / "spack", tmp_path / "pkgs") == first
    assert len(calls) == 1


def test_a_directory_another_user_owns_is_left_to_its_owner(tmp_path):
    """Root computing the account's variables must not make the account's misc cache root's."""
    import pytest
    if os.geteuid() != 0:
        pytest.skip("needs root to give the directory to another user")
    spack, pkgs = tmp_path / "spack", tmp_path / "pkgs"
    spack.mkdir(), pkgs.mkdir()
    parent = tmp_path / "spack-misc"
    made(parent, "same", spack, pkgs)
    os.chown(parent, 65534, 65534)
    runner.seed_builtin_indexes(parent / "new", spack, pkgs)
    assert not (parent / "new").exists()
