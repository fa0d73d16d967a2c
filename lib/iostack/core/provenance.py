"""Which commit of the repository is running: releases and stored sessions name it."""
from __future__ import annotations

import pathlib
import re

from iostack.core import paths, process


def git(tree: pathlib.Path, *args) -> list:
    """git on `tree`, as any account may run it there: the service account reads root's
    checkouts, which git would refuse as another user's ("dubious ownership") unless told
    the directory is safe; the account trusting root's code is the safe direction."""
    return ["git", "-c", f"safe.directory={tree}", "-C", tree, *args]


def _git(*args: str) -> str:
    return process.capture(git(paths.REPO, *args)).stdout.strip()


def head_commit() -> str | None:
    """HEAD's commit, None outside a git checkout."""
    return _git("rev-parse", "HEAD") or None


def has_changes() -> bool:
    """Whether tracked files differ from HEAD."""
    return bool(_git("status", "--porcelain", "--untracked-files=no"))


#: `git archive` writes the commit it exports here (.gitattributes: export-subst)
EXPORTED_COMMIT = pathlib.Path(__file__).with_name("COMMIT")


def exported_commit() -> str | None:
    """The commit of an export (`git archive`, a release tarball), None in a checkout."""
    text = EXPORTED_COMMIT.read_text().strip() if EXPORTED_COMMIT.is_file() else ""
    return text if re.fullmatch(r"[0-9a-f]{40}", text) else None


def git_commit() -> str:
    """HEAD's commit, with `-dirty` when the work tree has changes; in an export, the commit
    git wrote into COMMIT; `unknown` only for a copy that is neither."""
    if (paths.REPO / ".git").exists():
        commit = head_commit()
        if commit:
            return commit + "-dirty" if has_changes() else commit
    return exported_commit() or "unknown"
