"""With real Spack, offline: audit our recipes, deploy `local` from the source mirror, load
its modules, and run its nightly checks on the Spack-built stack."""
import json
import os
import pathlib
import shutil
import subprocess

import pytest
from conftest import LOCAL_BUILT, built_from_source, fetched_urls, iostack
from support import account as support_account
from support import exectrace

from iostack.core import paths
from iostack.deployment import releases, stack
from iostack.spack import config
from iostack.site.target import SpackEnv
from iostack.spack import runner
from support import targets


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
    mirrors = config.registered_mirrors_file(targets.settings().cache).read_text()
    mirror_urls = [line.split('"')[1] for line in mirrors.splitlines() if "url:" in line]
    _, spack_packages = runner.locate(targets.settings())
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
    roots = {spec.name for spec in stack.roots_of(SpackEnv("local"))}
    assert {"eckit", "metkit", "fdb", "ior", "io500", "netcdf-output-bench",
            "nvme-stage"} <= set(roots)


# What the nightly's checks on `local` may run, by where it comes from; anything else (a
# program in a ReFrame stage directory above all) fails the listing test.
SHELL_AND_TOOLS = "/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/"


def last_attempts(report):
    return {(tc["name"], tc["environ"]): tc for run in report["runs"] for tc in run["testcases"]}


def test_the_nightly_on_the_spack_stack_passes(traced_nightly):
    run, report, _ = traced_nightly
    cases = last_attempts(report)
    failed = {n: tc["fail_reason"] for n, tc in cases.items() if tc["result"] != "pass"}
    assert failed == {}
    checks = {name.split()[0] for name, _ in cases}
    assert {"FdbBitIdentityCheck", "FdbCrossVersionCheck", "FdbThroughputCheck",
            "FdbWriterScalingCheck", "IO500Check", "IorLayoutCheck", "MdtestScalingCheck",
            "NetcdfOutputCheck", "OpenFOAMPitzDailyCheck", "StackSmokeCheck"} <= checks
    # every root of the lock was smoked, the gcc builds too (a `+gnu` environment), and the
    # recipes with stand-alone tests passed them
    smoke = {n.split("%package=")[1].split()[0]: tc for (n, _), tc in cases.items()
             if n.startswith("StackSmokeCheck")}
    assert set(smoke) == {spec.key for spec in stack.roots_of(SpackEnv("local"))}
    tested = {key.split("@")[0] for key, tc in smoke.items() if tc.get("spack_test") == "passed"}
    assert {"netcdf-output-bench", "fdb-archive-bench", "nvme-stage"} <= tested
    assert run.returncode == 0


def test_the_cold_build_and_the_nightly_ran_as_the_service_account(local_deploy,
                                                                    traced_nightly):
    """Issue 33: run as root (CI), bin/iostack built the stack and ran the nightly as the
    service account. Everything in the deployment root is the account's: Spack's installs,
    the release, the regression's stage and results; without the change of user, all of
    it would be root's."""
    acct = support_account.service()
    if acct is None:
        pytest.skip("not run as root: there is no service account to run as")
    root, _ = local_deploy
    files = [root / "opt", *root.rglob("*")]
    assert len(files) > 1000 and (root / "reframe" / "results.db").is_file()
    assert [p for p in files if os.lstat(p).st_uid != acct.uid][:5] == []
    built_by = [r.meta["built_by"] for r in releases.listing(root)]
    assert built_by and all(b == {"user": acct.name, "uid": acct.uid} for b in built_by)


def origin(path: str, root: pathlib.Path) -> str:
    """Where an executed file comes from."""
    opt = f"{root}/opt/"
    if path.startswith(opt):
        return "release " + path[len(opt):].split("/")[0]
    if exectrace.job_script(path):
        return "ReFrame job script"
    if "/stage/" in path or "/reframe/" in path:
        return "ReFrame stage"
    if path.startswith(str(paths.REPO)):
        return "repository " + str(pathlib.Path(path).relative_to(paths.REPO))
    if path.startswith(SHELL_AND_TOOLS):
        return "Debian " + path
    return "node " + path


def test_every_check_runs_the_release_or_debians_programs(traced_nightly, local_deploy):
    """The listing of what each check executed and where it came from (printed), and: no
    program from a ReFrame stage (nothing is built there), the stack's programs from the
    release in `stack`, Debian's in `builtin`."""
    root, _ = local_deploy
    _, _, executed = traced_nightly
    listing, stage = {}, []
    for (environ, test), files in sorted(executed.items()):
        check = test.split("_")[0]
        for path in files:
            where = origin(path, root)
            listing.setdefault((check, environ), {})[pathlib.Path(path).name] = where
            if where == "ReFrame stage":
                stage.append(f"{test}+{environ}: {path}")
    for (check, environ), programs in sorted(listing.items()):
        print(f"{check} +{environ}:")
        for name, where in sorted(programs.items()):
            print(f"    {name:28} {where}")
    assert stage == []
    stack_programs = {"fdb-write", "fdb-read", "fdb-hammer", "fdb-list", "fdb-info",
                      "fdb-archive-bench", "netcdf-output-bench", "ior", "mdtest", "io500"}
    for (check, environ), programs in listing.items():
        for name in stack_programs & set(programs):
            if check == "FdbCrossVersionCheck" and programs[name] == f"Debian /usr/bin/{name}":
                continue    # its other FDB is Debian's, on purpose (other_fdb_bin)
            if environ == "stack":
                assert programs[name].startswith("release "), (check, name, programs[name])
            else:
                assert programs[name] == f"Debian /usr/bin/{name}", (check, name, programs[name])
    ran = {name for programs in listing.values() for name in programs}
    assert stack_programs <= ran


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
