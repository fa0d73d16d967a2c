"""With real Spack: audit our recipes, check every site's lock, deploy `local`, load its modules."""
import os
import subprocess

import pytest

from iostack import locks, paths, sites


def iostack(*args, timeout=1800):
    p = subprocess.run([str(paths.REPO / "bin" / "iostack"), *args], capture_output=True,
                       text=True, timeout=timeout)
    print(p.stdout[-6000:], p.stderr[-3000:])
    return p


def local_recipes():
    base = paths.REPO / "packages" / "spack_repo" / "iostack" / "packages"
    return sorted(p.name.replace("_", "-") for p in base.iterdir() if (p / "package.py").exists())


def test_audit_packages_and_configs(tmp_path):
    p = iostack("spack", "--site", "local", "--root", str(tmp_path), "--",
                "audit", "packages", *local_recipes())
    assert p.returncode == 0
    p = iostack("spack", "--site", "local", "--root", str(tmp_path), "--", "audit", "configs")
    assert p.returncode == 0


@pytest.mark.parametrize("site", sites.spack_sites())
def test_site_lock_is_fresh(site):
    lock, seconds = locks.fresh_lock(site)
    print(f"{site}: concretized in {seconds:.0f} s")
    assert locks.differences(locks.committed_lock(site), lock) == []


def test_deploy_local_and_load_fdb_with_lmod(tmp_path):
    root = tmp_path / "local"
    p = iostack("deploy", "--site", "local", "--root", str(root), "--skip-regression")
    assert p.returncode == 0
    assert "spack -e" in p.stdout and "module lmod refresh" in p.stdout
    core = root / "modulefiles" / "Core"
    assert (core / "fdb" / "5.10.8.lua").is_file()
    # Spack wrote into the deployment's copy of the environment, never into the checkout
    assert (root / "spack-env" / "sites" / "local" / ".spack-env").is_dir()
    clean = subprocess.run(["git", "status", "--porcelain", "spack-env"], cwd=paths.REPO,
                           capture_output=True, text=True).stdout
    assert clean == ""
    assert not any("-" in f.stem and len(f.stem) > 20 for f in core.rglob("*.lua"))  # no hashes
    script = (f"source /usr/share/lmod/lmod/init/bash && module use {core} && module load fdb && "
              'echo "FDB_ROOT=$FDB_ROOT" && fdb-info --version')
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                         env={k: v for k, v in os.environ.items() if not k.startswith("LMOD")})
    assert out.returncode == 0, out.stderr
    assert "FDB_ROOT=/usr" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "5.10.8"
