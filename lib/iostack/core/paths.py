"""Where things live: the repository root is computed here and nowhere else. Environment
variables override every default."""
import os
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[3]
LIB = REPO / "lib"
SPACK_ENV_SITES = REPO / "spack-env" / "sites"
ANSIBLE_INVENTORIES = REPO / "ansible" / "inventories"
REFRAME_DIR = REPO / "reframe-tests"
REFRAME_CONFIG = REFRAME_DIR / "config" / "iostack.py"
META_MODULES = REPO / "modulefiles"
#: programs of ours the ReFrame checks build: the benchmarks (src/) and the checks' helpers
SRC = REPO / "src"
RFM_SRC = REFRAME_DIR / "src"


def references_dir() -> pathlib.Path:
    """The checks' performance references; IOSTACK_RFM_REFERENCES moves them (a site keeping
    its baselines elsewhere, the tests)."""
    return pathlib.Path(os.environ.get("IOSTACK_RFM_REFERENCES") or REFRAME_DIR / "references")


def job_pythonpath() -> str:
    """PYTHONPATH of a job that runs the job-side tools (`python3 -m iostack.deployment.fdbconfig`,
    `python3 -m iostack_rfm.gribcompare`, ...): stdlib only, so any python3 runs them."""
    return f"{LIB}:{REFRAME_DIR}"


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
