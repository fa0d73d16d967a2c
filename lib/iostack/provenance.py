"""Which commit of this repository is running: releases, results and bundles record it."""
import subprocess

from iostack import paths

#: `git archive` substitutes the commit here (.gitattributes: export-subst)
EXPORTED_COMMIT = paths.LIB / "iostack" / "COMMIT"


def repository_commit() -> str:
    """HEAD's commit, with `-dirty` when the work tree has changes; in an export, the commit
    git wrote into COMMIT; `unknown` only for a copy that is neither."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=paths.REPO, capture_output=True,
                              text=True).stdout.strip()
    if (paths.REPO / ".git").exists():
        commit = git("rev-parse", "HEAD")
        if commit:
            if git("status", "--porcelain", "--untracked-files=no"):
                commit += "-dirty"
            return commit
    exported = EXPORTED_COMMIT.read_text().strip() if EXPORTED_COMMIT.is_file() else ""
    if len(exported) == 40 and all(c in "0123456789abcdef" for c in exported):
        return exported
    return "unknown"
