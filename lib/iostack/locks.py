"""Site lock files: re-concretize a site from scratch and compare with its committed spack.lock.

The copy is concretized in a temporary tree, so checking never touches the repository; with
--update the fresh lock replaces the committed one (review its diff like code).
"""
import json
import pathlib
import shutil
import tempfile
import time

from iostack import paths, spack


def fresh_lock(site: str) -> tuple[dict, float]:
    with tempfile.TemporaryDirectory(prefix=f"iostack-lock-{site}-") as tmp:
        tree = pathlib.Path(tmp) / "spack-env"
        shutil.copytree(paths.REPO / "spack-env", tree,
                        ignore=shutil.ignore_patterns(".spack-env", "spack.lock"))
        env = dict(spack.environment(pathlib.Path(tmp) / "root"))
        start = time.monotonic()
        spack_bin = pathlib.Path(env["SPACK_ROOT"]) / "bin" / "spack"
        from iostack.run import run

        # through spack_offsite.py: a cluster's compilers are taken to target its libc
        run([spack_bin, "-e", tree / "sites" / site, "python", paths.REPO / "lib" / "iostack" /
             "spack_offsite.py", "concretize", "--fresh", "--force"], env_extra=env)
        elapsed = time.monotonic() - start
        return json.loads((tree / "sites" / site / "spack.lock").read_text()), elapsed


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
    if old.get("spack") != new.get("spack"):
        out.append(f"spack: {old.get('spack')} -> {new.get('spack')}")
    return out


def write(site: str, lock: dict):
    f = paths.SPACK_ENV_SITES / site / "spack.lock"
    f.write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n")
