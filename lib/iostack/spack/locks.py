"""Site lock files: re-concretize a site from scratch and compare with its committed spack.lock.

The copy is concretized in a temporary tree, so checking never touches the repository; with
--update the fresh lock replaces the committed one (review its diff like code).
"""
import concurrent.futures
import json
import os
import pathlib
import shutil
import tempfile
import time

from iostack.core import paths, process
from iostack.core.errors import Failed
from iostack.core.settings import Settings
from iostack.site.target import SpackEnv
from iostack.spack import runner


class ConcretizationFailed(Failed):
    """A site's concretization failed: the site and Spack's reason."""


def fresh_lock(settings: Settings, env: SpackEnv) -> tuple[dict, float]:
    """Concretize an environment from scratch in a temporary copy; (its lock, seconds taken)."""
    with tempfile.TemporaryDirectory(prefix=f"iostack-lock-{env.name.replace('/', '-')}-") as tmp:
        tree = pathlib.Path(tmp) / "spack-env"
        shutil.copytree(paths.REPO / "spack-env", tree,
                        ignore=shutil.ignore_patterns(".spack-env", "spack.lock"))
        variables = runner.environment(settings, pathlib.Path(tmp) / "root")
        start = time.monotonic()
        # `spack offsite` (spack-ext/spack-iostack): a cluster's compilers are taken to
        # target its libc
        proc = process.capture([runner.spack_bin(settings), "-e", tree / "sites" / env.name,
                                "offsite", "concretize", "--fresh", "--force"],
                               env_extra=variables)
        if proc.returncode != 0:
            raise ConcretizationFailed(f"{env}: {runner.error_line(proc.stderr)}")
        elapsed = time.monotonic() - start
        return json.loads((tree / "sites" / env.name / "spack.lock").read_text()), elapsed


def fresh_locks(settings: Settings, envs: list[SpackEnv],
                ) -> dict[SpackEnv, tuple[dict, float] | ConcretizationFailed]:
    """fresh_lock of several environments at once: each concretization is one clingo
    process on one core, so a node with several cores checks them side by side."""
    workers = max(1, min(len(envs), os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = {env: pool.submit(fresh_lock, settings, env) for env in envs}
    out: dict[SpackEnv, tuple[dict, float] | ConcretizationFailed] = {}
    for env, future in futures.items():
        try:
            out[env] = future.result()
        except ConcretizationFailed as e:
            out[env] = e
    return out


def committed_lock(env: SpackEnv) -> dict | None:
    f = env.committed_lock
    return json.loads(f.read_text()) if f.exists() else None


def differences(old: dict | None, new: dict) -> list[str]:
    if old is None:
        return ["no committed spack.lock"]
    out = []
    old_roots = {r["spec"]: r["hash"] for r in old.get("roots", [])}
    new_roots = {r["spec"]: r["hash"] for r in new.get("roots", [])}
    for spec in sorted(set(old_roots) | set(new_roots)):
        if old_roots.get(spec) != new_roots.get(spec):
            out.append(f"root {spec}: {old_roots.get(spec)} -> {new_roots.get(spec)}")
    for h in sorted(set(old["concrete_specs"]) ^ set(new["concrete_specs"])):
        side = "new" if h in new["concrete_specs"] else "gone"
        spec = (new if side == "new" else old)["concrete_specs"][h]
        out.append(f"{side} {spec['name']}@{spec['version']}/{h[:7]}")
    # Not compared: how Spack was obtained (old["spack"]: a clone records its commit, a
    # tarball `{'type': 'release'}`). Set-up checks Spack's identity against pins.json once.
    return out


def write(env: SpackEnv, lock: dict):
    f = env.committed_lock
    f.write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n")
