"""Where the repository's trees live: the repository root is computed here and nowhere
else. What a command may move (its cache, venv, deployment root, ...) is a setting
(iostack.core.settings), not a path here.

The repository (sites/, spack-env/, packages/, modulefiles/, reframe-tests/, pins.json) is
the checkout this package is in: bin/iostack's, or the one installed in editable mode
(`pip install -e`, as set-up does). A copy installed elsewhere (`pip install .`) reads the
repository named by IOSTACK_REPO, and says so when there is none (`require_repo`)."""
from __future__ import annotations

import os
import pathlib

from iostack.core.errors import IostackError

#: what a directory must hold to be the repository
MARKERS = ("pins.json", "sites", "spack-env")


def _is_repo(path: pathlib.Path) -> bool:
    return all((path / m).exists() for m in MARKERS)


def _repo() -> pathlib.Path:
    """The checkout this package is in, else IOSTACK_REPO (unchecked here: see require_repo)."""
    own = pathlib.Path(__file__).resolve().parents[3]
    if _is_repo(own) or not os.environ.get("IOSTACK_REPO"):
        return own
    return pathlib.Path(os.environ["IOSTACK_REPO"]).resolve()


REPO = _repo()


def require_repo() -> pathlib.Path:
    """REPO, if it is the repository; else an error saying how to name it."""
    if _is_repo(REPO):
        return REPO
    if os.environ.get("IOSTACK_REPO"):
        raise IostackError(f"IOSTACK_REPO={os.environ['IOSTACK_REPO']} is not an iostack "
                           f"repository (it has no {', '.join(MARKERS)})")
    raise IostackError(f"iostack is installed at {pathlib.Path(__file__).resolve().parents[1]}, "
                       "outside a checkout of its repository: set IOSTACK_REPO to the "
                       f"repository's directory (the one with {', '.join(MARKERS)})")


LIB = REPO / "lib"
SPACK_ENV_SITES = REPO / "spack-env" / "sites"
ANSIBLE_INVENTORIES = REPO / "ansible" / "inventories"
REFRAME_DIR = REPO / "reframe-tests"
META_MODULES = REPO / "modulefiles"
#: programs of ours the ReFrame checks build: the benchmarks (src/) and the checks' helpers
SRC = REPO / "src"
RFM_SRC = REFRAME_DIR / "src"


def reframe_config(site: str) -> pathlib.Path:
    """The ReFrame configuration of a site's systems (generated from its facts:
    iostack.site.generate)."""
    return REFRAME_DIR / "config" / f"{site}.py"


def job_pythonpath() -> str:
    """PYTHONPATH of a job that runs the job-side tools (`python3 -m iostack.deployment.fdbconfig`,
    `python3 -m iostack_rfm.jobs.gribcompare`, ...): stdlib only, so any python3 runs them."""
    return f"{LIB}:{REFRAME_DIR}"


def check_root(root: pathlib.Path) -> pathlib.Path:
    """`root`, unless it is a checkout of this repository (this one or another) or inside
    one outside its deploy/: Spack works in <root>/spack-env, refreshed from the checkout's
    spack-env/ by removing what was there, so a root at a checkout would wipe that checkout's
    own environments. Under a checkout's deploy/ (the default root) is its deployment."""
    resolved = root.resolve()
    for top in (resolved, *resolved.parents):
        if _is_repo(top) and not (resolved == top / "deploy" or top / "deploy" in resolved.parents):
            where = "is" if top == resolved else "is inside"
            raise IostackError(f"deployment root {root} {where} the iostack checkout {top}, whose "
                               "spack-env/ a deployment's would replace: choose a root outside "
                               f"it (or under {top / 'deploy'})")
    return root
