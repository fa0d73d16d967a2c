"""Releases: ids, verdicts, atomic switch and rollback, what prune keeps, and deploy's rule
that only a release whose regression passed becomes current (lib/iostack/deployment/releases.py,
lib/iostack/deployment/deploy.py), on release trees made here; tests/spack/test_spack_releases.py
does the same with real Spack builds."""
import datetime
import hashlib
import json
import os

import re

import pytest
from support import targets

from iostack.core import paths
from iostack.deployment import deploy, releases
from iostack.site.target import SpackEnv


def write_tree(path, modules=("fdb/5.10.8",)):
    """A module tree naming its release."""
    for mod in modules:
        f = path / "modulefiles" / "Core" / f"{mod}.lua"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f'whatis("{mod} of {path.name}")\n')


def make_release(root, rid, verdict=releases.PASSED, modules=("fdb/5.10.8",), site="local"):
    """A built release: its module tree, its spack.lock and its release.json."""
    path = root / "releases" / rid
    write_tree(path, modules)
    (path / "spack.lock").write_text(json.dumps({"roots": [], "release": rid}))
    meta = {"id": rid, "site": site, "commit": rid.split("-")[1], "spack_lock_sha256": "ab" * 32,
            "created": rid[:15], "regression": verdict,
            "modulefiles_sha256": releases.tree_digest(path / "modulefiles")}
    (path / "release.json").write_text(json.dumps(meta))
    return path


IDS = [f"2025061{i}T010000Z-c0mm1t{i}-10c4{i}" for i in range(6)]


def test_release_id_names_date_commit_and_lock():
    when = datetime.datetime(2025, 6, 12, 1, 30, 45, tzinfo=datetime.timezone.utc)
    assert releases.new_id("69e86d3a1b2c3d4e", "3f2a9c1b07" + "0" * 54, when) == \
        "20250612T013045Z-69e86d3a1b-3f2a9c1b07"
    assert releases.new_id("69e86d3a1b2c-dirty", "ff" * 32, when) == \
        "20250612T013045Z-69e86d3a1b-dirty-ffffffffff"


def test_create_copies_the_lock_and_records_building(tmp_path):
    lock = tmp_path / "spack.lock"
    lock.write_text('{"roots": []}\n')
    r = releases.create(tmp_path / "root", SpackEnv("local"), "abc123", lock)
    assert (r.path / "spack.lock").read_bytes() == lock.read_bytes()
    meta = json.loads((r.path / "release.json").read_text())
    assert meta["regression"] == "building" and meta["site"] == "local"
    assert meta["spack_lock_sha256"] == hashlib.sha256(lock.read_bytes()).hexdigest()
    assert r.in_progress()  # this process is building it
    assert r.id.endswith(f"-abc123-{meta['spack_lock_sha256'][:10]}")


def test_switch_is_a_symlink_rename_and_records_history(tmp_path):
    make_release(tmp_path, IDS[0])
    make_release(tmp_path, IDS[1])
    assert releases.current(tmp_path) is None
    old, seconds = releases.switch(tmp_path, IDS[0])
    # the time it took is what the history records (to the µs), whatever the machine's speed
    assert old is None and releases.history(tmp_path)[-1]["seconds"] == round(seconds, 6) >= 0
    assert os.readlink(tmp_path / "current") == f"releases/{IDS[0]}"  # relative: root can move
    old, _ = releases.switch(tmp_path, IDS[1])
    assert old == IDS[0]
    assert releases.current(tmp_path) == IDS[1] and releases.previous(tmp_path) == IDS[0]
    assert [(h["from"], h["to"]) for h in releases.history(tmp_path)] == [(None, IDS[0]), (IDS[0], IDS[1])]
    assert not list(tmp_path.glob(".current*"))  # no temporary link left behind


def test_switch_refuses_a_failed_release_unless_forced(tmp_path):
    make_release(tmp_path, IDS[0])
    make_release(tmp_path, IDS[1], verdict=releases.FAILED)
    releases.switch(tmp_path, IDS[0])
    with pytest.raises(releases.ReleaseError, match="regression failed.*--force"):
        releases.switch(tmp_path, IDS[1])
    assert releases.current(tmp_path) == IDS[0]
    releases.switch(tmp_path, IDS[1], force=True)
    assert releases.current(tmp_path) == IDS[1]
    assert releases.history(tmp_path)[-1]["forced"] is True


def test_switch_refuses_a_release_whose_tree_changed_since_it_was_built(tmp_path):
    path = make_release(tmp_path, IDS[0])
    f = path / "modulefiles" / "Core" / "fdb" / "5.10.8.lua"
    data = bytearray(f.read_bytes())
    data[3] ^= 0x01  # one bit
    f.write_bytes(bytes(data))
    with pytest.raises(releases.ReleaseError, match="changed since it was built"):
        releases.switch(tmp_path, IDS[0])
    assert releases.current(tmp_path) is None


def test_switch_to_an_unknown_release_names_the_known_ones(tmp_path):
    make_release(tmp_path, IDS[0])
    with pytest.raises(releases.ReleaseError, match=f"no release 'nope'.*{IDS[0]}"):
        releases.switch(tmp_path, "nope")
    with pytest.raises(releases.ReleaseError, match="no release"):
        releases.switch(tmp_path, "../releases")


def test_tree_digest_sees_a_bit_a_name_a_link_and_a_mode(tmp_path):
    top = make_release(tmp_path, IDS[0]) / "modulefiles"
    base = releases.tree_digest(top)
    f = top / "Core" / "fdb" / "5.10.8.lua"
    changes = [
        lambda: f.write_bytes(f.read_bytes()[:-1] + bytes([f.read_bytes()[-1] ^ 1])),
        lambda: f.rename(f.with_name("5.10.9.lua")),
        lambda: (top / "Core" / "link").symlink_to("fdb"),
        lambda: f.chmod(0o755),
    ]
    for change in changes:
        snapshot = {p: (p.read_bytes(), p.stat().st_mode) for p in top.rglob("*") if p.is_file()}
        change()
        assert releases.tree_digest(top) != base
        for p in list(top.rglob("*")):
            if p.is_symlink() or (p.is_file() and p not in snapshot):
                p.unlink()
        for p, (data, mode) in snapshot.items():
            p.write_bytes(data)
            p.chmod(mode)
        assert releases.tree_digest(top) == base


def test_prune_keeps_current_previous_and_the_newest(tmp_path):
    for i, rid in enumerate(IDS):
        make_release(tmp_path, rid, verdict=releases.FAILED if i == 4 else releases.PASSED)
    releases.switch(tmp_path, IDS[1])
    releases.switch(tmp_path, IDS[2])
    releases.switch(tmp_path, IDS[0])  # rollback: current is the oldest, previous IDS[2]
    gone, kept = releases.plan_prune(tmp_path, keep=1)
    assert [r.id for r in kept] == [IDS[0], IDS[2], IDS[5]]
    assert [r.id for r in gone] == [IDS[1], IDS[3], IDS[4]]
    removed, _ = releases.prune(targets.of(tmp_path), keep=1, garbage=False)
    assert sorted(p.name for p in (tmp_path / "releases").iterdir() if p.is_dir()) == \
        sorted([IDS[0], IDS[2], IDS[5]])
    assert removed == [IDS[1], IDS[3], IDS[4]]
    assert releases.current(tmp_path) == IDS[0]
    # keep 0 still keeps the current and the previous one
    removed, kept = releases.prune(targets.of(tmp_path), keep=0, garbage=False)
    assert removed == [IDS[5]] and kept == [IDS[0], IDS[2]]


def test_prune_never_removes_a_release_being_built(tmp_path):
    make_release(tmp_path, IDS[0])
    releases.switch(tmp_path, IDS[0])
    lock = tmp_path / "lock"
    lock.write_text("{}")
    building = releases.create(tmp_path, SpackEnv("local"), "abc", lock)
    gone, kept = releases.plan_prune(tmp_path, keep=0)
    assert gone == [] and building.id in [r.id for r in kept]
    with pytest.raises(releases.ReleaseError, match="still being built"):
        releases.switch(tmp_path, building.id, force=True)


def test_prune_rejects_a_negative_keep(tmp_path):
    with pytest.raises(releases.ReleaseError, match="--keep must be 0 or more"):
        releases.plan_prune(tmp_path, keep=-1)


def test_previous_without_history_is_the_newest_older_passed_release(tmp_path):
    make_release(tmp_path, IDS[0])
    make_release(tmp_path, IDS[1], verdict=releases.FAILED)
    make_release(tmp_path, IDS[2])
    (tmp_path / "current").symlink_to(f"releases/{IDS[2]}")
    assert releases.previous(tmp_path) == IDS[0]


def test_current_that_is_not_a_symlink_is_refused(tmp_path):
    (tmp_path / "current").mkdir()
    with pytest.raises(releases.ReleaseError, match="not a symlink"):
        releases.current(tmp_path)


def test_table_lists_every_release_with_its_verdict_and_marks_current(tmp_path):
    make_release(tmp_path, IDS[0])
    make_release(tmp_path, IDS[1], verdict=releases.FAILED)
    make_release(tmp_path, IDS[2])
    releases.switch(tmp_path, IDS[0])
    releases.switch(tmp_path, IDS[2])
    lines = releases.table(tmp_path).splitlines()
    assert lines[0].split() == ["ID", "COMMIT", "LOCK", "SHA256", "DATE", "REGRESSION"]
    assert lines[1].split()[-1] == "previous" and IDS[0] in lines[1]
    assert lines[2].split()[-1] == "failed" and IDS[1] in lines[2]
    assert lines[3].startswith("*") and lines[3].split()[-1] == "current"
    assert "c0mm1t2" in lines[3] and "abababababab" in lines[3]


def test_session_extras_and_results_db_of_a_release(tmp_path):
    path = make_release(tmp_path, IDS[0])
    assert releases.session_extras(path) == [
        "--session-extras", f"release={IDS[0]},spack_lock_sha256={'ab' * 32}"]
    settings = targets.settings().replace(results_db=None)
    assert targets.of(tmp_path, release=path, settings_=settings).results_db == \
        tmp_path / "reframe" / "results.db"
    assert releases.session_extras(tmp_path) == []
    releases.switch(tmp_path, IDS[0])
    assert releases.tree_under_test(tmp_path) == path.resolve()


# --- deploy's rule: a release becomes current only if its regression passed -----------

@pytest.fixture
def fake_build(monkeypatch, tmp_path):
    """deploy.build without Spack: a module tree naming the release."""
    def build(target, release, buildcache=None):
        write_tree(release.path)
        releases.record(release, modulefiles_sha256=releases.tree_digest(release.modulefiles))
    monkeypatch.setattr(deploy, "build", build)
    monkeypatch.setattr(deploy.provenance, "git_commit", lambda: "c0ffee" * 6 + "c0ff")
    monkeypatch.setattr(deploy.paths, "SPACK_ENV_SITES", tmp_path / "sites")
    (tmp_path / "sites" / "local").mkdir(parents=True)
    (tmp_path / "sites" / "local" / "spack.lock").write_text('{"roots": []}')
    return tmp_path / "root"


def test_deploy_switches_only_to_a_release_whose_regression_passed(fake_build, capsys):
    root = fake_build
    seen = []
    assert deploy.deploy(targets.of(root), regression=lambda t, extras: seen.append(extras) or 0) == 0
    first = releases.current(root)
    assert first and releases.find(root, first).verdict == releases.PASSED
    assert seen[0][1].startswith(f"release={first},")
    rc = deploy.deploy(targets.of(root), regression=lambda t, extras: 7)
    assert rc == 7
    failed = [r for r in releases.listing(root) if r.id != first]
    assert [(r.verdict, r.meta["regression_rc"]) for r in failed] == [(releases.FAILED, 7)]
    assert releases.current(root) == first
    assert "FAILED its regression (rc 7): not made current; current stays" in capsys.readouterr().out


def test_deploy_no_switch_and_skip_regression_leave_current_alone(fake_build, capsys):
    root = fake_build
    assert deploy.deploy(targets.of(root), regression=None) == 0
    assert releases.current(root) is None
    assert releases.listing(root)[0].verdict == releases.UNTESTED
    assert deploy.deploy(targets.of(root), regression=lambda t, e: 0, switch=False) == 0
    assert releases.current(root) is None
    assert releases.listing(root)[-1].verdict == releases.PASSED
    assert "--no-switch" in capsys.readouterr().out


def test_deploy_of_an_environment_stores_site_and_environment_and_hints_a_switch_that_works(
        fake_build, iostack, capsys, monkeypatch):
    """The hint names the site (`--site local`), never the environment (`local/nwp`), and the
    command it prints runs."""
    sites = fake_build.parent / "sites"
    (sites / "local" / "nwp").mkdir()
    for env in (sites / "local", sites / "local" / "nwp"):
        (env / "spack.yaml").write_text("spack: {}\n")
        (env / "spack.lock").write_text('{"roots": []}')
    root = fake_build
    assert deploy.deploy(targets.of(root, env="nwp"), regression=None) == 0
    (release,) = releases.listing(root)
    assert (release.meta["site"], release.meta["env"]) == ("local", "local/nwp")
    assert release.spack_env == SpackEnv("local", "nwp") and release.site == "local"
    (hint,) = re.findall(r"to use it untested: bin/iostack (switch .*)$", capsys.readouterr().out,
                         re.M)
    assert hint == f"switch --site local --root {root} {release.id} --force"
    p = iostack(*hint.split())
    assert p.returncode == 0, p.stderr
    assert releases.current(root) == release.id


def test_deploy_records_a_build_failure(monkeypatch, fake_build):
    def broken(target, release, buildcache=None):
        raise SystemExit(1)
    monkeypatch.setattr(deploy, "build", broken)
    with pytest.raises(SystemExit):
        deploy.deploy(targets.of(fake_build), regression=lambda t, e: 0)
    (only,) = releases.listing(fake_build)
    assert only.verdict == releases.BUILD_FAILED
    assert releases.current(fake_build) is None


# --- the commands: one line and a non-zero exit on bad input, nothing changed -------------

def test_commands_refuse_bad_input_in_one_line(tmp_path, iostack):
    make_release(tmp_path, IDS[0])
    make_release(tmp_path, IDS[1], verdict=releases.FAILED)
    releases.switch(tmp_path, IDS[0])
    for args, message in [
        (("switch", "--root", tmp_path, "nope"), "no release 'nope'"),
        (("switch", "--root", tmp_path, IDS[1]), "regression failed"),
        (("prune", "--root", tmp_path, "--keep", "-1", "--keep-installs"), "--keep must be 0 or more"),
        (("releases", "--site", "atlantis", "--root", tmp_path), "unknown site 'atlantis'"),
    ]:
        p = iostack(*args)
        assert p.returncode in (1, 2) and message in p.stderr, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert releases.current(tmp_path) == IDS[0]
    assert len(releases.listing(tmp_path)) == 2


def test_commands_list_switch_and_prune(tmp_path, iostack):
    assert "no releases in" in iostack("releases", "--root", tmp_path).stdout
    for rid in IDS[:3]:
        make_release(tmp_path, rid)
    p = iostack("switch", "--root", tmp_path, IDS[2])
    assert p.returncode == 0 and f"(none) -> {IDS[2]}" in p.stdout
    listing = iostack("releases", "--root", tmp_path).stdout.splitlines()
    assert len(listing) == 4 and listing[3].split()[:2] == ["*", IDS[2]]
    # IDS[1] is the one before the current (no switch history: the newest older passed one)
    p = iostack("prune", "--root", tmp_path, "--keep", "0", "--dry-run")
    assert f"would remove 1 release(s): {IDS[0]}; kept 2: {IDS[1]}, {IDS[2]}" in p.stdout
    assert len(releases.listing(tmp_path)) == 3
    p = iostack("prune", "--root", tmp_path, "--keep", "0", "--keep-installs")
    assert p.returncode == 0 and f"removed 1 release(s): {IDS[0]}" in p.stdout
    assert [r.id for r in releases.listing(tmp_path)] == IDS[1:3]


def test_deploy_records_a_regression_that_could_not_run(fake_build):
    def refused(tree, extras):
        raise SystemExit(2)  # e.g. nightly's preflight: the mode's checks did not load
    with pytest.raises(SystemExit):
        deploy.deploy(targets.of(fake_build), regression=refused)
    (only,) = releases.listing(fake_build)
    assert (only.verdict, only.meta["regression_rc"]) == (releases.FAILED, 2)
    assert releases.current(fake_build) is None


def test_a_release_nightly_waits_for_any_run_on_its_deployment(tmp_path, monkeypatch):
    from iostack.regression import nightly

    path = make_release(tmp_path, IDS[0])
    held = []

    class Held(Exception):
        pass

    def hold(lock, deadline):
        held.append(lock)
        raise Held
    monkeypatch.setattr(nightly.runlock, "hold", hold)
    monkeypatch.setattr(nightly.packages, "missing_on_this_node", lambda purpose: [])
    with pytest.raises(Held):
        nightly.run(targets.of(tmp_path, release=path))
    assert held == [tmp_path / "reframe" / "nightly.lock"]  # the deployment's, not the release's


def test_a_release_results_db_is_its_deployments(tmp_path):
    settings = targets.settings().replace(results_db=None)
    path = make_release(tmp_path, IDS[0])
    assert targets.of(tmp_path, release=path, settings_=settings).results_db == \
        targets.of(tmp_path, settings_=settings).results_db == tmp_path / "reframe" / "results.db"
    moved = settings.replace(results_db=tmp_path / "local.db")
    assert targets.of(tmp_path, release=path, settings_=moved).results_db == tmp_path / "local.db"
    assert targets.of(tmp_path, state=tmp_path / "s", settings_=settings).results_db == \
        tmp_path / "s" / "results.db"


def test_module_chains_say_what_loads_each_package_of_the_release(tmp_path):
    """etc/lmod/hierarchy.lua, which the meta-modules read: fdb after its MPI, as Spack's
    hierarchy puts it; a Debian external at its own module."""
    (tmp_path / "spack.lock").write_bytes((paths.SPACK_ENV_SITES / "local" / "spack.lock")
                                          .read_bytes())
    text = deploy.write_module_chains(tmp_path, SpackEnv("local")).read_text()
    assert text.startswith("-- Written by bin/iostack deploy")
    assert '  ["fdb"] = {"openmpi/4.1.4", "fdb/5.13.106"},\n' in text
    assert '  ["eccodes"] = {"eccodes/2.28.0"},\n' in text
    assert text.endswith("}\n")


# --- a shared root: prune and deploy hold its lock against every host (iostack.core.lease) --

def foreign_lock(root, until, host="other-node", pid=4242):
    """The root's lock as a deploy on another host leaves it, its lease ending at `until`."""
    stamp = until.strftime("%Y-%m-%dT%H:%M:%SZ")
    lock = root / releases.ROOT_LOCK
    lock.write_text(json.dumps({"host": host, "pid": pid, "user": "svc", "what": "deploy of local",
                                "started": "2026-01-01T00:00:00Z", "lease_until": stamp,
                                "token": "theirs"}))
    return lock


def on_disk(root):
    return sorted((str(p.relative_to(root)), p.read_bytes() if p.is_file() else None)
                  for p in root.rglob("*"))


def soon(seconds):
    return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)


@pytest.fixture
def three(tmp_path):
    """A root with three releases, the newest current: prune --keep 0 would remove the first."""
    for rid in IDS[:3]:
        make_release(tmp_path, rid)
    releases.switch(tmp_path, IDS[2])
    return tmp_path


def test_prune_is_refused_while_another_host_holds_the_root(three, iostack):
    lock = foreign_lock(three, soon(300))
    before = on_disk(three)
    p = iostack("prune", "--root", three, "--keep", "0", "--keep-installs")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "on host other-node" in p.stderr and "lease ends at" in p.stderr, p.stderr
    assert json.loads(lock.read_text())["lease_until"] in p.stderr
    assert on_disk(three) == before         # nothing removed, their lock left alone


def test_prune_takes_over_a_lease_past_its_end(three, capsys):
    foreign_lock(three, soon(-60))
    removed, _ = releases.prune(targets.of(three), keep=0, garbage=False)
    assert removed == [IDS[0]]
    assert "took over" in capsys.readouterr().out
    assert not (three / releases.ROOT_LOCK).exists()    # released at the end


def test_prune_takes_over_a_lock_of_this_host_whose_process_is_gone(three):
    import socket
    foreign_lock(three, soon(300), host=socket.gethostname(), pid=2 ** 22 + 1)  # > pid_max
    assert releases.prune(targets.of(three), keep=0, garbage=False)[0] == [IDS[0]]


def test_prune_is_refused_by_a_live_process_of_this_host(three):
    import socket
    foreign_lock(three, soon(300), host=socket.gethostname(), pid=os.getppid())
    with pytest.raises(releases.lease.Held, match="pid"):
        releases.prune(targets.of(three), keep=0, garbage=False)
    assert len(releases.listing(three)) == 3


def test_prune_refuses_while_a_kept_release_cannot_be_read(three, monkeypatch):
    # the current release's record damaged: gc would not know its environment and would
    # uninstall what users load; nothing is removed, not even the old release
    monkeypatch.setattr(releases, "collect_garbage",
                        lambda *a: pytest.fail("garbage collected past an unreadable release"))
    meta = three / "releases" / IDS[2] / "release.json"
    meta.write_text('{"id": "' + IDS[2] + '", "creat')
    before = on_disk(three)
    for dry_run in (True, False):
        with pytest.raises(releases.ReleaseError,
                           match=f"release {IDS[2]}: its release.json cannot be read"):
            releases.prune(targets.of(three), keep=0, dry_run=dry_run)
    assert on_disk(three) == before
    meta.write_text("[]")                   # valid JSON, not a release's record
    before = on_disk(three)
    with pytest.raises(releases.ReleaseError, match="not a release's record"):
        releases.prune(targets.of(three), keep=0, garbage=False)
    assert on_disk(three) == before


def test_deploy_holds_the_root_so_a_prune_elsewhere_waits(fake_build):
    root = fake_build
    refusals = []

    def regression(target, extras):
        # a prune during the deploy (what another host's prune meets)
        with pytest.raises(releases.lease.Held, match="deploy of local") as e:
            releases.prune(targets.of(root), keep=0, garbage=False)
        refusals.append(str(e.value))
        return 0
    assert deploy.deploy(targets.of(root), regression=regression) == 0
    assert refusals and not (root / releases.ROOT_LOCK).exists()


def test_deploy_is_refused_while_another_host_prunes(fake_build):
    root = fake_build
    root.mkdir()
    foreign_lock(root, soon(300))
    with pytest.raises(releases.lease.Held, match="other-node"):
        deploy.deploy(targets.of(root), regression=lambda t, e: 0)
    assert releases.listing(root) == []
