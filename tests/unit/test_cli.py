"""bin/iostack: clear errors, commands shown before they run, set-up without root."""
import os

import pytest

from iostack import cli
from iostack.core import paths
from iostack.core.errors import IostackError
from iostack.offline import setup
from iostack.site.target import SpackEnv
from iostack.spack import runner
from support import targets


def test_unknown_site_fails_before_anything_runs(iostack):
    p = iostack("deploy", "--site", "atlantis")
    assert p.returncode == 2
    assert "unknown site 'atlantis'" in p.stderr
    assert "+ " not in p.stdout  # no command was run


def test_deploy_without_spack_says_what_is_missing_and_how_to_provide_it(tmp_path, iostack):
    p = iostack("deploy", "--root", str(tmp_path / "r"),
                env={"SPACK_ROOT": str(tmp_path / "nospack"), "IOSTACK_CACHE": str(tmp_path)})
    assert p.returncode == 2
    assert "Spack not found" in p.stderr and "SPACK_ROOT" in p.stderr
    assert not (tmp_path / "r").exists()


@pytest.fixture
def fake_spack(tmp_path):
    """Settings naming an empty Spack checkout and builtin repo (SPACK_ROOT,
    IOSTACK_SPACK_PACKAGES)."""
    for d in ("a/bin", "p/repos/spack_repo/builtin"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "a/bin/spack").write_text("")
    (tmp_path / "p/repos/spack_repo/builtin/repo.yaml").write_text("")
    return targets.settings(SPACK_ROOT=tmp_path / "a", IOSTACK_SPACK_PACKAGES=tmp_path / "p")


def test_spack_location_prefers_spack_root(tmp_path, fake_spack):
    assert runner.locate(fake_spack) == (tmp_path / "a", tmp_path / "p")
    with pytest.raises(runner.SpackMissing, match="spack-packages"):
        runner.locate(fake_spack.replace(spack_packages=tmp_path / "missing"))


def test_spack_environment_isolates_user_config(tmp_path, fake_spack):
    env = runner.environment(fake_spack, tmp_path / "root")
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


def test_commands_are_shown_as_they_would_be_run(capsys):
    from iostack.core.process import show

    show(["true"], {"A": "b c"}, "/", ())
    assert capsys.readouterr().out.strip() == "+ cd / && A='b c' true"


def test_deployed_env_is_a_refreshed_copy_that_keeps_spack_state(tmp_path):
    root = tmp_path / "root"
    env_dir = runner.deployed_env(SpackEnv("local"), root)
    assert env_dir == root / "spack-env" / "sites" / "local"
    assert (env_dir / "spack.yaml").read_text() == (paths.SPACK_ENV_SITES / "local" / "spack.yaml").read_text()
    # Spack's state survives a refresh; a file the checkout no longer has does not
    (env_dir / ".spack-env" / "transaction_lock").parent.mkdir()
    (env_dir / ".spack-env" / "transaction_lock").write_text("")
    (env_dir / "stale.yaml").write_text("x")
    (env_dir / "spack.lock").write_text("{}")
    runner.deployed_env(SpackEnv("local"), root)
    assert (env_dir / ".spack-env" / "transaction_lock").exists()
    assert not (env_dir / "stale.yaml").exists()
    assert (env_dir / "spack.lock").read_text() == (paths.SPACK_ENV_SITES / "local" / "spack.lock").read_text()
    assert (root / "spack-env" / "common" / "modules.yaml").is_file()  # relative includes resolve


def test_mirror_register_writes_the_nodes_mirrors_once(tmp_path, iostack):
    """The one writer of the node's mirrors.yaml, for set-up's bundles and Ansible's role."""
    import yaml

    env = {"IOSTACK_CACHE": str(tmp_path)}
    args = ["mirror", "register", "--source=sources=https://mirror.example.org/spack",
            "--buildcache=site-cache=file:///srv/buildcache", "--unsigned"]
    p = iostack(*args, env=env)
    assert p.returncode == 0
    path = tmp_path / "spack-config" / "mirrors.yaml"
    assert p.stdout.startswith(f"iostack: {path}: written (2 mirror(s)")
    assert yaml.safe_load(path.read_text()) == {"mirrors": {
        "sources": {"url": "https://mirror.example.org/spack", "source": True, "binary": False},
        "site-cache": {"url": "file:///srv/buildcache", "source": False, "binary": True,
                       "signed": False}}}
    again = iostack(*args, env=env)
    assert again.returncode == 0 and again.stdout == f"iostack: {path}: unchanged\n"
    bad = iostack("mirror", "register", "--source=nourl", env=env)
    assert bad.returncode == 2 and bad.stderr == "iostack: error: 'nourl': give a mirror as NAME=URL\n"


@pytest.mark.parametrize("argv, given", [
    (["test", "-n", "0", "tests/unit"], ["-n", "0", "tests/unit"]),   # README's own line
    (["test", "--", "-x", "tests/unit"], ["-x", "tests/unit"]),
    (["test", "tests/unit", "-k", "cli"], ["tests/unit", "-k", "cli"]),
    (["test"], []),
])
def test_everything_after_test_is_pytests(argv, given):
    """argparse alone refuses `test -n 0` (REMAINDER takes no leading option)."""
    assert cli.parse(argv).pytest_args == given


def test_test_help_is_bin_iostacks_own(iostack):
    assert iostack("test", "--help").returncode == 0
