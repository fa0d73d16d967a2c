"""Find the pinned Spack and run it with the repository's configuration only.

Spack is found, in this order: SPACK_ROOT (with IOSTACK_SPACK_PACKAGES for builtin), then
the clones `iostack setup` made in the cache directory. ~/.spack and /etc/spack are never
read (SPACK_DISABLE_LOCAL_CONFIG), so a user's own Spack settings cannot change a site.
"""
import os
import pathlib
import re
import shutil
import subprocess

from iostack import paths, pins
from iostack.run import run


class SpackMissing(RuntimeError):
    pass


HOW_TO_PROVIDE = (
    "run `bin/iostack setup` where github.com is reachable, or, on an air-gapped node, set "
    f"SPACK_ROOT to a Spack {pins.SPACK_TAG} checkout and IOSTACK_SPACK_PACKAGES to a "
    f"spack-packages checkout at tag {pins.SPACK_PACKAGES_TAG}"
)


def locate() -> tuple[pathlib.Path, pathlib.Path]:
    """(spack root, spack-packages checkout) or SpackMissing saying what is missing."""
    cache = paths.cache()
    root = pathlib.Path(os.environ["SPACK_ROOT"]) if os.environ.get("SPACK_ROOT") else cache / "spack"
    pkgs = (pathlib.Path(os.environ["IOSTACK_SPACK_PACKAGES"])
            if os.environ.get("IOSTACK_SPACK_PACKAGES") else cache / "spack-packages")
    if not (root / "bin" / "spack").is_file():
        raise SpackMissing(f"Spack not found at {root}: {HOW_TO_PROVIDE}")
    if not (pkgs / "repos" / "spack_repo" / "builtin" / "repo.yaml").is_file():
        raise SpackMissing(f"spack-packages (builtin repo) not found at {pkgs}: {HOW_TO_PROVIDE}")
    return root, pkgs


def environment(root_dir: pathlib.Path) -> dict:
    """Variables every spack call gets; the site configs refer to the IOSTACK_* ones."""
    spack_root, pkgs = locate()
    venv_bin = paths.venv() / "bin"
    return {
        "SPACK_ROOT": spack_root,
        # clingo comes from the venv, so Spack never tries to bootstrap it
        "SPACK_PYTHON": venv_bin / "python",
        "SPACK_DISABLE_LOCAL_CONFIG": "1",
        "SPACK_USER_CACHE_PATH": root_dir / "cache" / "user",
        "IOSTACK_ROOT": root_dir,
        "IOSTACK_REPO": paths.REPO,
        "IOSTACK_SPACK_PACKAGES": pkgs,
    }


def deployed_env(site: str, root_dir: pathlib.Path) -> pathlib.Path:
    """The site's environment as the deployment uses it: spack-env/ copied to <root>/spack-env,
    so what Spack writes (spack.lock, .spack-env/) stays with the deployment and never changes
    the checkout. Each call refreshes the copy from the checkout, keeping Spack's own state."""
    dest = root_dir / "spack-env"
    for path in sorted(dest.rglob("*"), reverse=True) if dest.exists() else []:
        if ".spack-env" in path.relative_to(dest).parts:
            continue
        if path.is_file() or path.is_symlink():
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    shutil.copytree(paths.REPO / "spack-env", dest, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(".spack-env"))
    return dest / "sites" / site


def spack(args, root_dir, site=None, **kw):
    env = environment(root_dir)
    cmd = [pathlib.Path(env["SPACK_ROOT"]) / "bin" / "spack"]
    if site:
        cmd += ["-e", deployed_env(site, root_dir)]
    return run(cmd + list(args), env_extra=env, **kw)


def version(spack_root: pathlib.Path) -> tuple[int, ...]:
    out = subprocess.run([str(spack_root / "bin" / "spack"), "--version"], capture_output=True,
                         text=True, env={**os.environ, "SPACK_PYTHON": str(paths.venv() / "bin" / "python"),
                                         "SPACK_DISABLE_LOCAL_CONFIG": "1"}).stdout
    m = re.match(r"(\d+)\.(\d+)", out.strip())
    if not m:
        raise SpackMissing(f"{spack_root}/bin/spack --version printed {out!r}")
    return int(m.group(1)), int(m.group(2))
