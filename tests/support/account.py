"""The service account the suite's builds and nightlies run as (iostack.core.account): run
as root, `bin/iostack deploy`, `nightly` and the other AS_ACCOUNT commands run as it, so the
places a test gives them (a deployment root, a state directory, an output file's directory)
must be the account's, and the directories above them open to it.

pytest makes its temporary directories 0700, root's: `give(path)` hands one to the account
and lets it through the directories above (search only, o+x: it can enter, not list). Run
as another user, there is no drop and nothing to do."""
from __future__ import annotations

import os
import pathlib
import stat

from iostack.core import account
from support import targets


def service() -> account.Account | None:
    """The account root's bin/iostack becomes, if the suite runs as root and it exists."""
    if os.geteuid() != 0:
        return None
    return account.lookup(targets.settings().user)


def open_above(path: pathlib.Path, acct: account.Account) -> None:
    """Let the account search every directory above `path` that it cannot (o+x on root's
    temporary directories; nothing else is changed, and nothing made readable)."""
    for parent in reversed(pathlib.Path(os.path.abspath(path)).parents):
        st = os.stat(parent)
        if not account.may(st, acct, 1) and st.st_uid == 0 and stat.S_ISDIR(st.st_mode):
            os.chmod(parent, stat.S_IMODE(st.st_mode) | stat.S_IXOTH)


def give(path: pathlib.Path) -> pathlib.Path:
    """`path` (a directory, made if missing) the account's, reachable by it."""
    path = pathlib.Path(path)
    path.mkdir(parents=True, exist_ok=True)
    acct = service()
    if acct is not None:
        open_above(path, acct)
        os.chown(path, acct.uid, acct.gid)
    return path


def state(settings) -> pathlib.Path:
    """Where the account that runs Spack for bin/iostack keeps its key ring and Spack's
    misc cache, under these settings' cache: the service account's when the suite runs as
    root, else the settings' own."""
    acct = service()
    return settings.account_state(acct.name) if acct else settings.state


def key_ring(settings) -> pathlib.Path:
    """The key ring bin/iostack's Spack signs build caches with and trusts them by."""
    return state(settings) / "gpg"


def give_tree(path: pathlib.Path) -> pathlib.Path:
    """`path` and everything in it the account's (a tree a test made as root for a command
    that runs as the account to change), reachable by it."""
    give(path)
    acct = service()
    if acct is not None:
        for p in pathlib.Path(path).rglob("*"):
            os.chown(p, acct.uid, acct.gid, follow_symlinks=False)
    return pathlib.Path(path)


def for_root(path: pathlib.Path) -> pathlib.Path:
    """`path` (a directory) root's again and readable by all: a place for a copy of the
    repository that root's bin/iostack runs from (iostack.core.trust refuses code in a
    directory another user owns), which the account must read too."""
    path = pathlib.Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(path, 0, 0)
    path.chmod(0o755)
    return path
