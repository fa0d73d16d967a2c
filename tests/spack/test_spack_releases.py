"""Releases with real Spack, ReFrame and Lmod: three deploys of a stand-in for site `local`.

The stand-in is a copy of this checkout whose `local` environment lists a few nodes of the
committed local lock as its roots, with that part of the lock (part of a unified
concretization is one), so nothing is concretized and Spack builds only what takes seconds:
  1. nvme-stage and ecbuild, with a module policy that renames nvme-stage's module: the
     regression (the stack smoke check) fails, as `module load nvme-stage/<version>` would
     for users;
  2. nvme-stage: passes, becomes current;
  3. the same stack with a changed meta-module: passes, becomes current while a job loads
     modules from `current` in a loop.
Then: switching back restores release 2's module tree byte for byte, and prune removes
release 1 and, through `spack gc`, ecbuild, which only release 1 used, while every install
of the current release stays.
"""
import json
import os
import pathlib
import shutil
import subprocess
import time

import pytest

from iostack.core import paths
from iostack.deployment import releases
from iostack.spack import recipes, runner
from support import account, targets

LMOD_INIT = "/usr/share/lmod/lmod/init/bash"
STANDIN = """# test stand-in for site local (tests/spack/test_spack_releases.py)
spack:
  include:
  - packages.yaml
  - modules.yaml
  - ../../common/repos.yaml
  - ../../common/mirrors.yaml
  - ../../common/config.yaml
  - ../../common/concretizer.yaml
  - ../../common/modules.yaml
  specs: {specs}
  view: false
"""
# a module policy change that renames nvme-stage's module: users' (and the smoke check's)
# `module load nvme-stage/<version>` no longer finds it
RENAMED = """modules:
  default:
    lmod:
      projections:
        nvme-stage: '{name}/{version}-renamed'
"""
GIT = ["git", "-c", "user.name=iostack-test", "-c", "user.email=test@iostack.invalid"]
LOCAL_LOCK = json.loads((paths.SPACK_ENV_SITES / "local" / "spack.lock").read_text())
NVME_STAGE = next(s["version"] for s in LOCAL_LOCK["concrete_specs"].values()
                  if s["name"] == "nvme-stage")
# modules the ReFrame `stack` environment of local loads besides nvme-stage (its 'modules'
# in reframe-tests/iostack_rfm/config.py)
STACK_ENV_MODULES = ["openmpi", "fdb", "ior", "io500", "fdb-archive-bench", "netcdf-output-bench"]


def subset_lock(lock: dict, specs: list[str]) -> dict:
    """The lock's nodes named in `specs` as roots, and every node they depend on."""
    roots = []
    for name in specs:
        (h,) = [h for h, s in lock["concrete_specs"].items() if s["name"] == name]
        roots.append({"hash": h, "spec": name})
    keep, todo = set(), [r["hash"] for r in roots]
    while todo:
        h = todo.pop()
        if h not in keep:
            keep.add(h)
            todo += [d["hash"] for d in lock["concrete_specs"][h].get("dependencies", [])]
    return {**lock, "roots": roots,
            "concrete_specs": {h: s for h, s in lock["concrete_specs"].items() if h in keep}}


def check_lock_is_buildable(lock: dict, names: list[str]) -> None:
    """The stand-in builds these nodes as locked: a recipe of ours must still declare the
    locked version, itself or by the builtin recipe it subclasses (else the lock is stale,
    and Spack's install says only that the source and the recipe disagree)."""
    _, spack_packages = runner.locate(targets.settings())
    for spec in lock["concrete_specs"].values():
        recipe = (paths.REPO / "packages" / "spack_repo" / "iostack" / "packages"
                  / spec["name"].replace("-", "_") / "package.py")
        if spec["name"] in names and recipe.is_file() and \
                spec["version"] not in recipes.declared_versions(recipe, spack_packages):
            pytest.fail(f"local's spack.lock is stale: it pins {spec['name']}@{spec['version']}, "
                        f"which neither {recipe.relative_to(paths.REPO)} nor a builtin recipe "
                        "it subclasses declares; bin/iostack lock --update local")


def commit(repo: pathlib.Path, message: str) -> None:
    subprocess.run([*GIT, "-C", str(repo), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "commit", "-q", "-m", message], check=True)


def set_stack(repo: pathlib.Path, specs: list[str], renamed: bool = False) -> None:
    site = repo / "spack-env" / "sites" / "local"
    lock = LOCAL_LOCK
    manifest = STANDIN.format(specs=json.dumps(specs))
    (site / "renamed.yaml").write_text(RENAMED)
    if renamed:
        manifest = manifest.replace("  include:\n", "  include:\n  - renamed.yaml\n")
    (site / "spack.yaml").write_text(manifest)
    check_lock_is_buildable(lock, specs)
    (site / "spack.lock").write_text(json.dumps(subset_lock(lock, specs), indent=1, sort_keys=True))


def iostack(repo, *args, timeout=1800):
    start = time.monotonic()
    p = subprocess.run([str(repo / "bin" / "iostack"), *map(str, args)], capture_output=True,
                       text=True, timeout=timeout, env={**os.environ, "IOSTACK_VENV": str(targets.settings().venv)})
    print(f"$ iostack {' '.join(map(str, args))}  ({time.monotonic() - start:.0f} s, rc {p.returncode})")
    print(p.stdout[-5000:], p.stderr[-3000:])
    return p


JOB = """source {init}
module use {root}/current/modulefiles/Core
module load nvme-stage
early=$(command -v nvme-stage)
while [ ! -e {stop} ]; do
    rel=$(readlink {root}/current)
    out=$( (module purge && module load nvme-stage && nvme-stage --version) 2>&1 )
    case "$out" in
        *"nvme-stage {version}"*) echo "ok $rel" ;;
        *) echo "FAIL $rel: $out" | tr '\\n' ' '; echo ;;
    esac
done
"$early" --version >/dev/null && echo "loaded before: ok"
"""


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    if not os.path.exists(LMOD_INIT):
        pytest.skip("Lmod not installed (apt: lmod)")
    # root's: the copy of the repository is what root's bin/iostack runs (the deployment
    # root in it is made the service account's by the deploy)
    base = account.for_root(tmp_path_factory.mktemp("releases"))
    repo, root = base / "repo", base / "root"
    files = subprocess.run(["git", "-C", str(paths.REPO), "ls-files", "-co", "--exclude-standard"],
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        if (paths.REPO / f).is_file() and not f.startswith("deploy/"):
            (repo / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(paths.REPO / f, repo / f)
    subprocess.run([*GIT, "init", "-q", str(repo)], check=True)
    # the smoke check, in the `stack` environment, whose other modules (the real local
    # stack's) the stand-in maps onto the one it has
    regression = ["--", "-n", "StackSmokeCheck",
                  *[a for m in STACK_ENV_MODULES for a in ("-M", f"{m}:nvme-stage")]]
    out = {}

    set_stack(repo, ["nvme-stage", "ecbuild"], renamed=True)
    commit(repo, "stand-in 1: nvme-stage, ecbuild, nvme-stage's module renamed")
    out["deploy1"] = iostack(repo, "deploy", "--root", root, *regression)
    (out["r1"],) = [r.id for r in releases.listing(root)]

    set_stack(repo, ["nvme-stage"])
    commit(repo, "stand-in 2: nvme-stage")
    out["deploy2"] = iostack(repo, "deploy", "--root", root, *regression)
    out["r2"] = releases.current(root)
    out["digest2"] = releases.tree_digest(root / "current" / "modulefiles")

    meta = repo / "modulefiles" / "openifs-env" / "0.0.3.lua"
    meta.write_text(meta.read_text() + "-- changed for release 3\n")
    commit(repo, "stand-in 3: a meta-module changes")
    stop = base / "stop-job"
    job_log = base / "job.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LMOD", "MODULE", "_ModuleTable"))}
    with open(job_log, "w") as log:
        job = subprocess.Popen(["bash", "--noprofile", "--norc", "-c",
                                JOB.format(init=LMOD_INIT, root=root, stop=stop, version=NVME_STAGE)],
                               stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            out["deploy3"] = iostack(repo, "deploy", "--root", root, *regression)
            # until the job has loaded from the new release too (a hang guard, not a timing)
            new, give_up = releases.current(root), time.monotonic() + 600
            while out["deploy3"].returncode == 0 and f"ok releases/{new}" not in job_log.read_text():
                assert job.poll() is None and time.monotonic() < give_up, job_log.read_text()[-2000:]
                time.sleep(0.2)
        finally:
            stop.touch()
            job.wait(timeout=600)
    out["r3"] = releases.current(root)
    out["job"] = job_log.read_text().splitlines()
    return repo, root, out


def test_a_release_whose_regression_fails_stays_but_is_never_current(deployed):
    repo, root, out = deployed
    assert out["deploy1"].returncode != 0
    assert "FAILED its regression" in out["deploy1"].stdout
    r1 = releases.find(root, out["r1"])
    assert r1.verdict == releases.FAILED
    # the smoke check failed it: nvme-stage/<version> did not load
    (report,) = (r1.path / "reframe" / "reports").glob("run-report-*.json")
    failed = {tc["name"]: tc["fail_reason"] for run in json.loads(report.read_text())["runs"][-1:]
              for tc in run["testcases"] if tc["result"] == "fail"}
    (reason,) = [r for name, r in failed.items() if "nvme-stage" in name]
    assert f"module nvme-stage/{NVME_STAGE} did not load" in reason
    assert (r1.modulefiles / "Core" / "nvme-stage" / f"{NVME_STAGE}-renamed.lua").is_file()
    assert out["r1"] not in [h["to"] for h in releases.history(root)]
    assert out["deploy2"].returncode == 0 and out["deploy3"].returncode == 0
    assert len({out["r1"], out["r2"], out["r3"]}) == 3

    listing = iostack(repo, "releases", "--root", root).stdout.splitlines()
    rows = {line.split()[1] if line.startswith("*") else line.split()[0]: line for line in listing[1:]}
    assert "failed" in rows[out["r1"]]
    assert rows[out["r2"]].rstrip().endswith("previous")
    assert rows[out["r3"]].startswith("*") and rows[out["r3"]].rstrip().endswith("current")


def test_a_job_loading_from_current_keeps_working_through_deploy_and_switch(deployed):
    _, _, out = deployed
    job = out["job"]
    assert [line for line in job if not line.startswith("ok ")][-1:] == ["loaded before: ok"]
    assert not [line for line in job if line.startswith("FAIL")]
    seen = [line.split()[1].split("/")[-1] for line in job if line.startswith("ok ")]
    assert seen[0] == out["r2"] and seen[-1] == out["r3"]  # before and after the switch


def test_switching_back_restores_the_previous_module_tree_byte_for_byte(deployed):
    repo, root, out = deployed
    digest3 = releases.tree_digest(root / "current" / "modulefiles")
    assert digest3 != out["digest2"]  # the two trees differ (the meta-module)
    p = iostack(repo, "switch", "--root", root, out["r2"])
    assert p.returncode == 0 and "ms)" in p.stdout
    assert releases.tree_digest(root / "current" / "modulefiles") == out["digest2"]
    refused = iostack(repo, "switch", "--root", root, out["r1"])
    assert refused.returncode == 1 and "regression failed" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert iostack(repo, "switch", "--root", root, out["r3"]).returncode == 0
    assert releases.tree_digest(root / "current" / "modulefiles") == digest3


def test_lmod_walks_the_current_tree_and_its_cache_says_the_same(deployed):
    """Through `current`, avail and spider list the same with the release's spider cache
    as without it (a walk, which must not fail on Spack's self-unlocking Core compiler)."""
    _, root, _ = deployed
    lmod = pathlib.Path(LMOD_INIT).parents[1] / "libexec" / "lmod"
    rc = root / "test-lmodrc.lua"
    rc.write_text(f'scDescriptT = {{ {{ dir = "{root}/current/lmod/cache", '
                  f'timestamp = "{root}/current/lmod/timestamp" }} }}\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LMOD", "MODULE", "_ModuleTable"))}
    env.update(MODULEPATH=f"{root}/current/modulefiles/Core", HOME=str(root / "home"), TERM="dumb")
    for sub in ("avail", "spider"):
        out = [subprocess.run([str(lmod), "bash", sub], capture_output=True, text=True, check=True,
                              env={**env, **extra}).stderr
               for extra in ({"LMOD_RC": str(rc)}, {"LMOD_IGNORE_CACHE": "1"})]
        assert out[0] == out[1] and "nvme-stage" in out[0]


def spack_prefixes(root: pathlib.Path, release: releases.Release) -> dict[str, pathlib.Path]:
    """name -> install prefix of each spec of the release's lock that Spack installs."""
    lock = json.loads((release.env_dir() / "spack.lock").read_text())
    out = {}
    for h, spec in lock["concrete_specs"].items():
        if not spec.get("external"):
            found = list((root / "opt").glob(f"{spec['name']}-*-{h[:7]}"))
            out[spec["name"]] = found[0] if found else root / "opt" / f"{spec['name']}-?-{h[:7]}"
    return out


def test_prune_never_removes_the_current_release_or_anything_it_uses(deployed):
    repo, root, out = deployed
    r1 = releases.find(root, out["r1"])
    only_r1 = spack_prefixes(root, r1)["ecbuild"]
    assert only_r1.is_dir()
    p = iostack(repo, "prune", "--root", root, "--keep", "0")
    assert p.returncode == 0, p.stderr
    assert "spack" in p.stdout and " gc " in p.stdout  # Spack's own garbage collection ran
    assert sorted(r.id for r in releases.listing(root)) == sorted([out["r2"], out["r3"]])
    assert not only_r1.exists()  # only release 1 used it
    current = releases.find(root, out["r3"])
    kept = spack_prefixes(root, current)
    assert "nvme-stage" in kept and all(prefix.is_dir() for prefix in kept.values())
    script = (f"source {LMOD_INIT} && module use {root}/current/modulefiles/Core && "
              "module load nvme-stage && nvme-stage --version")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LMOD", "MODULE", "_ModuleTable"))}
    run = subprocess.run(["bash", "--noprofile", "--norc", "-c", script], capture_output=True,
                         text=True, env=env)
    assert run.returncode == 0 and run.stdout.startswith(f"nvme-stage {NVME_STAGE}"), run.stderr
