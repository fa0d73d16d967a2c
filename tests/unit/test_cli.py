"""bin/iostack: clear errors, commands shown before they run, set-up without root."""
import os
import subprocess

import pytest

from iostack.core import paths
from iostack.core.errors import IostackError
from iostack.offline import setup
from iostack.spack import runner


def iostack(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([str(paths.REPO / "bin" / "iostack"), *args], capture_output=True,
                          text=True, env=e)


def test_unknown_site_fails_before_anything_runs():
    p = iostack("deploy", "--site", "atlantis")
    assert p.returncode == 2
    assert "unknown site 'atlantis'" in p.stderr
    assert "+ " not in p.stdout  # no command was run


def test_deploy_without_spack_says_what_is_missing_and_how_to_provide_it(tmp_path):
    p = iostack("deploy", "--root", str(tmp_path / "r"),
                env={"SPACK_ROOT": str(tmp_path / "nospack"), "IOSTACK_CACHE": str(tmp_path)})
    assert p.returncode == 2
    assert "Spack not found" in p.stderr and "SPACK_ROOT" in p.stderr
    assert not (tmp_path / "r").exists()


@pytest.fixture
def fake_spack(tmp_path, monkeypatch):
    """An empty Spack checkout and builtin repo, named by SPACK_ROOT/IOSTACK_SPACK_PACKAGES."""
    for d in ("a/bin", "p/repos/spack_repo/builtin"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "a/bin/spack").write_text("")
    (tmp_path / "p/repos/spack_repo/builtin/repo.yaml").write_text("")
    monkeypatch.setenv("SPACK_ROOT", str(tmp_path / "a"))
    monkeypatch.setenv("IOSTACK_SPACK_PACKAGES", str(tmp_path / "p"))


def test_spack_location_prefers_spack_root(tmp_path, monkeypatch, fake_spack):
    assert runner.locate() == (tmp_path / "a", tmp_path / "p")
    monkeypatch.setenv("IOSTACK_SPACK_PACKAGES", str(tmp_path / "missing"))
    with pytest.raises(runner.SpackMissing, match="spack-packages"):
        runner.locate()


def test_spack_environment_isolates_user_config(tmp_path, fake_spack):
    env = runner.environment(tmp_path / "root")
    assert env["SPACK_DISABLE_LOCAL_CONFIG"] == "1"
    assert env["IOSTACK_ROOT"] == tmp_path / "root"
    assert str(env["SPACK_USER_CACHE_PATH"]).startswith(str(tmp_path / "root"))


def test_setup_without_root_prints_the_apt_line_and_stops(monkeypatch, capsys):
    monkeypatch.setattr(setup, "missing_apt_packages", lambda pkgs: ["fdb5", "lmod"])
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    ran = []
    monkeypatch.setattr(setup, "run", lambda *a, **k: ran.append(a))
    with pytest.raises(IostackError, match="2 system packages missing .set-up needs root for apt") as e:
        setup.system_packages(skip_apt=False)
    assert e.value.exit_code == 2
    err = capsys.readouterr().err
    assert "apt-get install -y --no-install-recommends fdb5 lmod" in err
    assert ran == []


def test_apt_list_has_the_local_stack():
    pkgs = setup.apt_packages("bookworm", ("deploy",))
    for needed in ("lmod", "openmpi-bin", "gfortran", "cmake", "libeccodes-tools",
                   "libeccodes-dev", "libeckit-dev", "fdb5", "libfdb5-dev"):
        assert needed in pkgs
    assert len(pkgs) == len(set(pkgs))


def test_commands_are_printed_before_they_run(capsys):
    from iostack.core.process import run

    run(["true"], env_extra={"A": "b c"}, cwd="/")
    assert capsys.readouterr().out.strip() == "+ cd / && A='b c' true"


def test_deployed_env_is_a_refreshed_copy_that_keeps_spack_state(tmp_path):
    root = tmp_path / "root"
    env_dir = runner.deployed_env("local", root)
    assert env_dir == root / "spack-env" / "sites" / "local"
    assert (env_dir / "spack.yaml").read_text() == (paths.SPACK_ENV_SITES / "local" / "spack.yaml").read_text()
    # Spack's state survives a refresh; a file the checkout no longer has does not
    (env_dir / ".spack-env" / "transaction_lock").parent.mkdir()
    (env_dir / ".spack-env" / "transaction_lock").write_text("")
    (env_dir / "stale.yaml").write_text("x")
    (env_dir / "spack.lock").write_text("{}")
    runner.deployed_env("local", root)
    assert (env_dir / ".spack-env" / "transaction_lock").exists()
    assert not (env_dir / "stale.yaml").exists()
    assert (env_dir / "spack.lock").read_text() == (paths.SPACK_ENV_SITES / "local" / "spack.lock").read_text()
    assert (root / "spack-env" / "common" / "modules.yaml").is_file()  # relative includes resolve
