"""The hand-written meta-modules under real Lmod: load, default version, swap, family
conflict, and the variables each version sets.

Spack generates eccodes/fdb/openifs modules only at deploy time (the spack tier loads the
real ones); here a tree of minimal modules with those names stands in for them."""
import json
import os
import shutil
import subprocess

import pytest

from iostack import cli, paths

LMOD_INIT = "/usr/share/lmod/lmod/init/bash"
pytestmark = pytest.mark.skipif(not os.path.exists(LMOD_INIT), reason="Lmod not installed (apt: lmod)")

STANDINS = {"eccodes/2.28.0": "ECCODES", "fdb/5.10.8": "FDB", "openifs/49r1": "OPENIFS"}


@pytest.fixture
def root(tmp_path):
    core = tmp_path / "modulefiles" / "Core"
    for mod, var in STANDINS.items():
        f = core / f"{mod}.lua"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f'setenv("{var}_ROOT", "/opt/{mod}")\n')
    (tmp_path / "etc" / "fdb5").mkdir(parents=True)
    (tmp_path / "etc" / "fdb5" / "config.yaml").write_text("type: local\n")
    cli.install_meta_modules(tmp_path)
    return tmp_path


def lmod(root, script):
    """Run module commands in a clean bash with Lmod; return (rc, env as dict, stderr)."""
    full = (f"source {LMOD_INIT} && module use {root}/modulefiles/Core && {script} && "
            "python3 -c 'import json,os; print(json.dumps(dict(os.environ)))'")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LMOD", "MODULE", "_ModuleTable"))}
    p = subprocess.run(["bash", "--noprofile", "--norc", "-c", full], capture_output=True,
                       text=True, env=env)
    out = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {}
    return p.returncode, out, p.stderr


def test_default_version_is_marked_and_loaded(root):
    rc, _, err = lmod(root, "module avail openifs-env 2>&1 | tee /dev/stderr >/dev/null")
    assert rc == 0
    assert "openifs-env/0.0.2 (D)" in err.replace("  ", " ")
    rc, env, err = lmod(root, "module load openifs-env")
    assert rc == 0, err
    assert "openifs-env/0.0.2" in env["LOADEDMODULES"].split(":")
    assert env["IOSTACK_OIFS_OUTPUT"] == "fdb"
    assert env["FDB_ROOT"] == "/opt/fdb/5.10.8" and env["OPENIFS_ROOT"] == "/opt/openifs/49r1"
    assert env["FDB5_CONFIG_FILE"] == str(root / "etc" / "fdb5" / "config.yaml")
    assert "FDB_ASYNC_WRITE" not in env


def test_grib_only_version_does_not_load_fdb(root):
    rc, env, err = lmod(root, "module load openifs-env/0.0.1")
    assert rc == 0, err
    assert env["IOSTACK_OIFS_OUTPUT"] == "grib"
    assert "FDB_ROOT" not in env and "FDB5_CONFIG_FILE" not in env
    assert env["ECCODES_ROOT"] == "/opt/eccodes/2.28.0"


def test_swap_changes_version_and_settings(root):
    rc, env, err = lmod(root, "module load openifs-env && module swap openifs-env openifs-env/0.0.3")
    assert rc == 0, err
    loaded = env["LOADEDMODULES"].split(":")
    assert "openifs-env/0.0.3" in loaded and "openifs-env/0.0.2" not in loaded
    assert env["FDB_ASYNC_WRITE"] == "1"


def test_family_replaces_rather_than_stacks(root):
    # Loading a second version of the family replaces the first (Lmod's family rule).
    rc, env, err = lmod(root, "module load openifs-env/0.0.3 && module load openifs-env/0.0.1")
    assert rc == 0, err
    assert [m for m in env["LOADEDMODULES"].split(":") if m.startswith("openifs-env")] == ["openifs-env/0.0.1"]
    assert "FDB_ASYNC_WRITE" not in env


def test_missing_dependency_is_an_error(root):
    shutil.rmtree(root / "modulefiles" / "Core" / "fdb")
    rc, _, err = lmod(root, "module load openifs-env")
    assert rc != 0
    assert "fdb" in err


def test_lmod_syntax_check_passes():
    checker = "/usr/share/lmod/lmod/libexec/check_module_tree_syntax"
    if not os.path.exists(checker):
        pytest.skip("Lmod's check_module_tree_syntax not installed")
    p = subprocess.run([checker, str(paths.META_MODULES)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_a_version_without_settings_is_refused(root):
    d = root / "modulefiles" / "Core" / "openifs-env"
    (d / "9.9.9.lua").symlink_to(".openifs-env.lua")
    rc, _, err = lmod(root, "module load openifs-env/9.9.9")
    assert rc != 0
    assert "no settings for version 9.9.9" in " ".join(err.split())
