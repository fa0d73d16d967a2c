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
from iostack.spack import runner
from iostack.core.errors import Failed


class ConcretizationFailed(Failed):
    """A site's concretization failed: the site and Spack's reason."""


def fresh_lock(site: str) -> tuple[dict, float]:
    """Concretize a site from scratch in a temporary copy; (its lock, seconds taken)."""
    with tempfile.TemporaryDirectory(prefix=f"iostack-lock-{site.replace('/', '-')}-") as tmp:
        tree = pathlib.Path(tmp) / "spack-env"
        shutil.copytree(paths.REPO / "spack-env", tree,
                        ignore=shutil.ignore_patterns(".spack-env", "spack.lock"))
        env = runner.environment(pathlib.Path(tmp) / "root")
        start = time.monotonic()
        # `spack offsite` (spack-ext/spack-iostack): a cluster's compilers are taken to
        # target its libc
        proc = process.capture([runner.spack_bin(), "-e", tree / "sites" / site, "offsite",
                                "concretize", "--fresh", "--force"], env_extra=env)
        if proc.returncode != 0:
            raise ConcretizationFailed(f"{site}: {runner.error_line(proc.stderr)}")
        elapsed = time.monotonic() - start
        return json.loads((tree / "sites" / site / "spack.lock").read_text()), elapsed


def fresh_locks(sites: list[str]) -> dict[str, tuple[dict, float] | ConcretizationFailed]:
    """fresh_lock of several sites at once: each concretization is one clingo process on one
    core, so a node with several cores checks them side by side."""
    workers = max(1, min(len(sites), os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = {site: pool.submit(fresh_lock, site) for site in sites}
    out: dict[str, tuple[dict, float] | ConcretizationFailed] = {}
    for site, future in futures.items():
        try:
            out[site] = future.result()
        except ConcretizationFailed as e:
            out[site] = e
    return out


def committed_lock(site: str) -> dict | None:
    f = paths.SPACK_ENV_SITES / site / "spack.lock"
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


def write(site: str, lock: dict):
    f = paths.SPACK_ENV_SITES / site / "spack.lock"
    f.write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n")
