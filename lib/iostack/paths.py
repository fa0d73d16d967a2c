"""Where things live. Environment variables override every default."""
import os
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]
SPACK_ENV_SITES = REPO / "spack-env" / "sites"
ANSIBLE_INVENTORIES = REPO / "ansible" / "inventories"
REFRAME_DIR = REPO / "reframe-tests"
REFRAME_CONFIG = REFRAME_DIR / "config" / "iostack.py"
META_MODULES = REPO / "modulefiles"


def venv() -> pathlib.Path:
    return pathlib.Path(os.environ.get("IOSTACK_VENV", REPO / ".venv"))


def cache() -> pathlib.Path:
    """Spack and spack-packages clones made by set-up, shared by every checkout of the repo."""
    if os.environ.get("IOSTACK_CACHE"):
        return pathlib.Path(os.environ["IOSTACK_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return pathlib.Path(base) / "iostack"


def deploy_root(site: str, root: str | None = None) -> pathlib.Path:
    """A site's deployment: opt/ (Spack installs), modulefiles/ (Lmod), reframe/ (reports)."""
    if root:
        return pathlib.Path(root).resolve()
    if os.environ.get("IOSTACK_ROOT"):
        return pathlib.Path(os.environ["IOSTACK_ROOT"]).resolve()
    return REPO / "deploy" / site
