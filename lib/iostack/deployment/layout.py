"""The layout of a deployment root, which every layer above reads: whether a tree is a
release, and which deployment owns it (where its results DB is: iostack.site.target.Target).

    <root>/releases/<id>/release.json   a release (deployment/releases.py)
    <root>/current -> releases/<id>     the release users have
    <root>/reframe/results.db           every release's regression sessions
"""
from __future__ import annotations

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
