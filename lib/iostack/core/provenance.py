"""Which commit of the repository is running: releases and stored sessions name it."""
from __future__ import annotations

from iostack.core import paths, process


def _git(*args: str) -> str:
    return process.capture(["git", "-C", paths.REPO, *args]).stdout.strip()


def head_commit() -> str | None:
    """HEAD's commit, None outside a git checkout."""
    return _git("rev-parse", "HEAD") or None


def has_changes() -> bool:
    """Whether tracked files differ from HEAD."""
    return bool(_git("status", "--porcelain", "--untracked-files=no"))


def git_commit() -> str:
    """HEAD's commit, with `-dirty` when the work tree has changes (`unknown` outside git)."""
    commit = head_commit() or "unknown"
    return commit + "-dirty" if has_changes() else commit
