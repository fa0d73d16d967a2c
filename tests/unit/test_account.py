"""The service account root builds and tests as (iostack.core.account): which commands it
runs, what it must reach, and what root gives it."""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import tempfile

import pytest

from iostack import cli
from iostack.core import account

OTHER = account.Account("builder", 54321, 54321, pathlib.Path("/nonexistent"), (54321,))
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")


def commands() -> set[str]:
    """Every command of bin/iostack, with `mirror`'s subcommands apart."""
    ap = cli.parser()
    (sub,) = (a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    found = set()
    for name, p in sub.choices.items():
        nested = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        found |= ({f"{name} {n}" for n in nested[0].choices} if name == "mirror"
                  else {name})
    return found


def test_every_command_is_run_by_root_or_by_the_account_and_never_both():
    assert cli.AS_ACCOUNT | cli.AS_ROOT == commands()
    assert not cli.AS_ACCOUNT & cli.AS_ROOT


def test_what_builds_tests_or_runs_the_deployed_programs_is_the_accounts():
    assert {"deploy", "nightly", "buildcache", "bundle", "spack", "counts",
            "mirror create"} <= cli.AS_ACCOUNT
    assert {"setup", "test", "lock", "mirror register"} <= cli.AS_ROOT


def test_the_command_line_runs_again_as_the_account_through_setpriv():
    assert account.as_account(OTHER, ["bin/iostack", "deploy"]) == [
        "setpriv", "--reuid=54321", "--regid=54321", "--init-groups", "--", "bin/iostack",
        "deploy"]
    env = account.environment(OTHER, pathlib.Path("/c/accounts/builder"), pathlib.Path("/c"))
    assert env == {"HOME": "/nonexistent", "USER": "builder", "LOGNAME": "builder",
                   "IOSTACK_CACHE": "/c", "IOSTACK_STATE": "/c/accounts/builder"}


def test_root_is_never_the_service_account():
    with pytest.raises(account.AccountError, match="uid 0"):
        account.lookup("root")
    assert account.lookup("no-such-account-here") is None
    with pytest.raises(account.AccountError, match="bin/iostack setup` creates it"):
        account.require("no-such-account-here", "deploy")


@pytest.fixture
def open_dir():
    """A directory anyone may enter (/tmp's own child: pytest's are closed to others)."""
    top = pathlib.Path(tempfile.mkdtemp(prefix="iostack-unit-", dir="/tmp"))
    top.chmod(0o711)
    yield top
    shutil.rmtree(top)


@needs_root
def test_a_directory_the_account_cannot_enter_is_named(open_dir):
    shut = open_dir / "shut"
    shut.mkdir(mode=0o700)
    (shut / "iostack").mkdir()
    why = account.unreachable(shut / "iostack", OTHER)
    assert why == f"{shut} is 0700, owned by uid 0: builder cannot enter it"
    shut.chmod(0o711)
    assert account.unreachable(shut / "iostack", OTHER) is None
    (shut / "iostack").chmod(0o700)
    assert account.unreachable(shut / "iostack", OTHER) == \
        f"{shut}/iostack is 0700, owned by uid 0: builder cannot read it"
    os.chown(shut / "iostack", 0, 54321)
    (shut / "iostack").chmod(0o750)    # its group may
    assert account.unreachable(shut / "iostack", OTHER) is None
    assert account.unreachable(shut / "missing" / "deeper", OTHER) is None
    with pytest.raises(account.AccountError, match=r"deploy runs as the service account "
                       r"builder, which cannot reach .*: .* cannot enter it; keep iostack"):
        shut.chmod(0o700)
        account.require_reachable([shut / "iostack"], OTHER, "deploy")


@needs_root
def test_root_makes_a_missing_directory_the_accounts_and_never_takes_over_one(tmp_path):
    made = account.own_directory(tmp_path / "deploy" / "local", OTHER)
    st = os.stat(made)
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (54321, 54321, 0o755)
    assert os.stat(tmp_path / "deploy").st_uid == 0           # what is above stays root's
    assert account.own_directory(made, OTHER) == made          # the account's already
    link = tmp_path / "link"
    link.symlink_to(made)
    assert account.own_directory(link, OTHER) == link          # a link to the account's
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    with pytest.raises(account.AccountError, match=r"owned by uid 0, not by the service "
                       r"account builder .*chown -R builder:"):
        account.own_directory(theirs, OTHER)
    assert os.stat(theirs).st_uid == 0                          # refused, not chowned
    (tmp_path / "file").write_text("")
    with pytest.raises(account.AccountError, match="is not a directory"):
        account.own_directory(tmp_path / "file", OTHER)
