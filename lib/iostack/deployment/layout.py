"""The layout of a deployment root, which every layer above reads: whether a tree is a
release, which deployment owns it, and where its results DB is.

    <root>/releases/<id>/release.json   a release (deployment/releases.py)
    <root>/current -> releases/<id>     the release users have
    <root>/reframe/results.db           every release's regression sessions
"""
from __future__ import annotations

import os
import pathlib

RELEASES = "releases"
CURRENT = "current"
META = "release.json"
LOCK = "spack.lock"


def is_release(tree: pathlib.Path) -> bool:
    return tree.parent.name == RELEASES and (tree / META).is_file()


def deployment_of(tree: pathlib.Path) -> pathlib.Path:
    """The deployment root a release belongs to (a tree that is no release is its own)."""
    return tree.parent.parent if is_release(tree) else tree


def results_db(root: pathlib.Path) -> pathlib.Path:
    """The results DB of a deployment: RFM_SQLITE_DB_FILE (ReFrame's own variable, for a
    root on a file system without reliable POSIX locks), else the configuration's
    <root>/reframe/results.db; a release's sessions are stored with its deployment's."""
    moved = os.environ.get("RFM_SQLITE_DB_FILE")
    if moved:
        return pathlib.Path(os.path.expandvars(moved))
    return deployment_of(root) / "reframe" / "results.db"


def release_results_db(tree: pathlib.Path) -> pathlib.Path | None:
    """The results DB every release's regression is stored in, its directory created
    (None: not a release, whose regression uses the configuration's own)."""
    if not is_release(tree):
        return None
    db = results_db(tree)
    db.parent.mkdir(parents=True, exist_ok=True)
    return db
