"""With real Spack, offline: audit our recipes, deploy `local` from the source mirror, load
its modules, and run its nightly checks on the Spack-built stack."""
import json
import os
import shutil
import subprocess

import pytest
from conftest import LOCAL_BUILT, built_from_source, fetched_urls, iostack

from iostack.core import paths
from iostack.deployment import stack
from iostack.spack import config


def local_recipes():
    base = paths.REPO / "packages" / "spack_repo" / "iostack" / "packages"
    return sorted(p.name.replace("_", "-") for p in base.iterdir() if (p / "package.py").exists())


def test_audit_packages_and_configs(tmp_path):
    p = iostack("spack", "--site", "local", "--root", tmp_path, "--",
                "audit", "packages", *local_recipes())
    assert p.returncode == 0
    p = iostack("spack", "--site", "local", "--root", tmp_path, "--", "audit", "configs")
    assert p.returncode == 0


def test_deploy_builds_the_stack_from_source_and_nothing_else(local_deploy):
    root, run = local_deploy
    assert built_from_source(run.output) == LOCAL_BUILT
    lock = json.loads((paths.SPACK_ENV_SITES / "local" / "spack.lock").read_text())
    versions = {s["name"]: s["version"] for s in lock["concrete_specs"].values()}
    assert (versions["eckit"], versions["metkit"], versions["fdb"], versions["ior"]) == \
        ("1.28.8", "1.11.22", "5.13.106", "4.0.0")
    # every node Spack did not build is a Debian external
    externals = {s["name"] for s in lock["concrete_specs"].values() if s.get("external")}
    assert externals | LOCAL_BUILT | {"io500", "netcdf-output-bench"} >= set(versions)
    # Spack wrote into the release's copy of the environment, never into the checkout
    assert (root / "current" / "spack-env" / "sites" / "local" / ".spack-env").is_dir()
    clean = subprocess.run(["git", "status", "--porcelain", "spack-env"], cwd=paths.REPO,
                           capture_output=True, text=True).stdout
    assert clean == ""


def test_nothing_is_fetched_beyond_the_configured_mirrors(local_deploy):
    _, run = local_deploy
    mirrors = config.registered_mirrors_file().read_text()
    mirror_urls = [line.split('"')[1] for line in mirrors.splitlines() if "url:" in line]
    _, spack_packages = __import__("iostack.spack.runner", fromlist=["locate"]).locate()
    allowed = [*mirror_urls, spack_packages.resolve().as_uri(),
               "file:///" + str(spack_packages.resolve())]  # Spack spells it file:////...
    urls = fetched_urls(run.output)
    assert urls, "the deploy fetched nothing at all"
    beyond = [u for u in urls if not any(u.replace("file:////", "file:///").startswith(a)
                                         for a in allowed)]
    assert beyond == []


def lmod(script: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LMOD", "MODULE"))}
    return subprocess.run(["bash", "-c", "source /usr/share/lmod/lmod/init/bash && " + script],
                          capture_output=True, text=True, env=env)


def test_modules_load_clean_and_debian_fdb_stays_beside(local_deploy, tmp_path):
    root, _ = local_deploy
    core = root / "current" / "modulefiles" / "Core"
    # IOR has no version option: a 1 KiB run prints it first
    out = lmod(f"cd {tmp_path} && module use {core} && module load openmpi fdb ior io500 "
               "nvme-stage && fdb-info --version && ior -b 1k -t 1k -o ior.tmp | head -1 && "
               "command -v io500 && nvme-stage --version && /usr/bin/fdb-info --version")
    assert out.returncode == 0 and out.stderr == "", out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "5.13.106"
    assert lines[1].startswith("IOR-4.0.0:")
    assert lines[2].startswith(str(root / "opt"))
    assert lines[3] == "nvme-stage 1.1.0"
    assert lines[4] == "5.10.8"  # Debian's FDB, the second one
    assert not any("-" in f.stem and len(f.stem) > 20 for f in core.rglob("*.lua"))  # no hashes


def test_lock_roots_are_the_stack_the_smoke_check_checks():
    roots = {spec.name for spec in stack.site_roots("local")}
    assert {"eckit", "metkit", "fdb", "ior", "io500", "netcdf-output-bench",
            "nvme-stage"} <= set(roots)


@pytest.fixture(scope="module")
def spack_stack_nightly(local_deploy, timings):
    """The nightly's checks that use the Spack-built FDB, IOR and io500, on that stack."""
    root, _ = local_deploy
    # -S, not -p: ReFrame 4.10 loses -p when it expands the nightly --mode
    run = iostack("nightly", "--site", "local", "--root", root, "--",
                  "-S", "valid_prog_environs=stack",
                  "-n", "FdbBitIdentityCheck", "-n", "FdbCrossVersionCheck",
                  "-n", "IO500Check", "-n", "IorLayoutCheck", "-n", "MdtestScalingCheck",
                  "-n", "StackSmokeCheck")
    timings["nightly checks on the Spack stack (local)"] = run.seconds
    reports = sorted((root / "current" / "reframe" / "reports").glob("run-report-*.json"),
                     key=os.path.getmtime)
    return run, json.loads(reports[-1].read_text())


def last_attempts(report):
    return {tc["name"]: tc for run in report["runs"] for tc in run["testcases"]}


def test_nightly_on_the_spack_stack_passes(spack_stack_nightly):
    run, report = spack_stack_nightly
    cases = last_attempts(report)
    failed = {n: tc["fail_reason"] for n, tc in cases.items() if tc["result"] != "pass"}
    assert failed == {}
    checks = {name.split()[0] for name in cases}
    assert {"FdbBitIdentityCheck", "FdbCrossVersionCheck", "IO500Check", "IorLayoutCheck",
            "MdtestScalingCheck", "StackSmokeCheck"} <= checks
    assert all(tc["environ"] == "stack" for tc in cases.values())
    # every root of the lock was queried, the gcc builds too (a `+gnu` environment)
    smoked = {n.split("%package=")[1].split()[0] for n in cases if n.startswith("StackSmokeCheck")}
    assert smoked == {spec.key for spec in stack.site_roots("local")}
    assert run.returncode == 0


def test_scratch_copy_of_spack_is_refused_when_it_carries_its_own_config(tmp_path, scratch_cache):
    """Spack reads $SPACK_ROOT/etc/spack whatever SPACK_DISABLE_LOCAL_CONFIG says; a gcc that
    Spack auto-detected there broke every cray-ex concretization. iostack refuses such a
    Spack, naming the file."""
    env, cache = scratch_cache
    real_root = (cache / "spack").resolve()
    copy = tmp_path / "spack"
    shutil.copytree(real_root, copy, symlinks=True,
                    ignore=shutil.ignore_patterns(".git", "__pycache__", "opt"))
    (cache / "spack").unlink()
    (cache / "spack").symlink_to(copy)
    site_scope = copy / "etc" / "spack" / "site"
    (site_scope / "packages.yaml").write_text(
        "packages:\n  gcc:\n    externals:\n    - spec: gcc@12.2.0 languages:='c,c++'\n"
        "      prefix: /usr\n")
    p = iostack("spack", "--site", "cray-ex", "--root", tmp_path / "root", "--", "spec", "fdb",
                env=env)
    assert p.returncode != 0
    assert len(p.error_lines) == 1
    assert str(site_scope / "packages.yaml") in p.error_lines[0]
    assert "Traceback" not in p.output
