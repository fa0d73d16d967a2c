"""Root only where root is needed: the service account that builds, tests and runs the
regression in root's stead.

Run as root, `bin/iostack` runs set-up, the test suite and what writes this checkout or the
node's configuration itself; every command that builds with Spack, runs ReFrame or the
programs a deployment installed, or writes a deployment root runs as the service account
(`IOSTACK_USER`, default `iostack`, which set-up and the Ansible `service_account` role
create): root re-executes it so (iostack.cli, `AS_ACCOUNT`). Third-party build systems,
their test suites and the regression then never run with root's rights, and what they
write belongs to the account.

Before it re-executes, root checks what the account needs: that it can reach the checkout,
its venv and the Spack trees (each directory above them searchable, the tree readable), and
it gives the account the two places it writes that root decides: a new deployment root, and
its state directory under root's cache (its key ring, Spack's misc cache and scratch root).
An existing deployment root that is not the account's is refused, never chowned: whoever
owns it may have planted links in it.

What the mode bits cannot say (ACLs, a file system that squashes root) is not read.
Standard library only."""
from __future__ import annotations

import dataclasses
import os
import pathlib
import stat

from iostack.core.errors import IostackError

#: the service account's name unless IOSTACK_USER names another
DEFAULT = "iostack"
#: its home (Ansible's `spack_stack_home` and `reframe_nightly_home` say the same)
HOME = pathlib.Path("/var/lib/iostack")


class AccountError(IostackError):
    """The service account is missing, or cannot reach or own what it needs."""


@dataclasses.dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int
    home: pathlib.Path
    #: every group it is in (its own first), as initgroups gives it
    groups: tuple[int, ...]


def lookup(name: str) -> Account | None:
    """The account `name` on this node, None if there is none. Root is never one."""
    import pwd

    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        return None
    if pw.pw_uid == 0:
        raise AccountError(f"the service account {name!r} has uid 0: builds and the regression "
                           "never run as root; name an unprivileged account (IOSTACK_USER)")
    groups = tuple(dict.fromkeys([pw.pw_gid, *os.getgrouplist(name, pw.pw_gid)]))
    return Account(name, pw.pw_uid, pw.pw_gid, pathlib.Path(pw.pw_dir), groups)


def require(name: str, command: str) -> Account:
    """The account, or one line saying how to have it."""
    found = lookup(name)
    if found is None:
        raise AccountError(f"{command} runs as the service account {name!r}, not as root, and "
                           f"there is no such account: `bin/iostack setup` creates it (or name "
                           "another with IOSTACK_USER)")
    return found


def as_account(account: Account, cmd) -> list:
    """`cmd` run as the account, from root (util-linux's setpriv: its uid, gid and groups;
    no capability survives the change of uid)."""
    return ["setpriv", f"--reuid={account.uid}", f"--regid={account.gid}", "--init-groups",
            "--", *cmd]


def environment(account: Account, state: pathlib.Path, cache: pathlib.Path) -> dict[str, str]:
    """What the account's process gets on top of root's environment: its own HOME and
    names, root's cache (Spack, the mirrors) and its own state there."""
    return {"HOME": str(account.home), "USER": account.name, "LOGNAME": account.name,
            "IOSTACK_CACHE": str(cache), "IOSTACK_STATE": str(state)}


#: root's own places in its environment, which the account must not take for its own
ROOTS_OWN = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
             "XDG_RUNTIME_DIR", "MAIL", "SUDO_COMMAND")


def may(st: os.stat_result, account: Account, bits: int) -> bool:
    """Whether the account has `bits` (a combination of 4 r, 2 w, 1 x) on a file of `st`."""
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid == account.uid:
        return (mode >> 6) & bits == bits
    if st.st_gid in account.groups:
        return (mode >> 3) & bits == bits
    return mode & bits == bits


def unreachable(path: pathlib.Path, account: Account) -> str | None:
    """Why the account cannot read `path` (a directory above it it cannot search, or the
    path itself unreadable), None if it can. Links are followed as the kernel follows them."""
    path = pathlib.Path(os.path.abspath(path))
    for part in [*reversed(path.parents), path]:
        try:
            st = os.stat(part)
        except FileNotFoundError:
            return None      # the directory above decides who may create it
        except PermissionError:
            continue         # root cannot stat it either: a network file system's, not ours
        need = 5 if stat.S_ISDIR(st.st_mode) else 4
        if part != path and not may(st, account, 1):
            return f"{part} is {stat.S_IMODE(st.st_mode):04o}, owned by uid {st.st_uid}: " \
                   f"{account.name} cannot enter it"
        if part == path and not may(st, account, need):
            return f"{part} is {stat.S_IMODE(st.st_mode):04o}, owned by uid {st.st_uid}: " \
                   f"{account.name} cannot read it"
    return None


#: what to do when the account cannot read the code it runs
CODE_HINT = ("keep iostack, its venv and Spack where the account can read them (clone iostack "
             "to /opt/iostack, say, not under /root)")


def require_reachable(paths: list[pathlib.Path], account: Account, command: str,
                      hint: str = CODE_HINT) -> None:
    for p in paths:
        why = unreachable(p, account)
        if why:
            raise AccountError(f"{command} runs as the service account {account.name}, which "
                               f"cannot reach {p}: {why}; {hint}")


def own_directory(path: pathlib.Path, account: Account, mode: int = 0o755) -> pathlib.Path:
    """`path`, the account's: made for it if missing (the directories above as root's,
    0755); an existing one must be a directory the account owns (never a link, never
    chowned: whoever owns it may have planted links in it)."""
    path = pathlib.Path(os.path.abspath(path))
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        os.mkdir(path, mode)
        os.chown(path, account.uid, account.gid, follow_symlinks=False)
        os.chmod(path, mode, follow_symlinks=False)
        return path
    if stat.S_ISLNK(st.st_mode):
        target = path.resolve()
        st = os.stat(target)
    if not stat.S_ISDIR(st.st_mode):
        raise AccountError(f"{path} is not a directory")
    if st.st_uid != account.uid:
        raise AccountError(f"{path} is owned by uid {st.st_uid}, not by the service account "
                           f"{account.name} that builds and tests there: hand it over "
                           f"(chown -R {account.name}: {path}, once you know what is in it) "
                           "or name another")
    return path
