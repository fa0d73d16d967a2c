"""Run a site's ReFrame regression with the repository's configuration: list what a mode
would load, and run it within a deadline, keeping the lines of its output the nightly's
verdict depends on (whether the session was stored, whether the report was written)."""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import signal
import sys
import threading
import time
from typing import NamedTuple

from iostack.core import paths
from iostack.core.errors import IostackError
from iostack.core import process
from iostack.deployment import layout

LMOD_CMD_DEFAULTS = ("/usr/share/lmod/lmod/libexec/lmod", "/opt/lmod/lmod/libexec/lmod")
#: after SIGINT at the deadline, ReFrame cancels its jobs; this long, then it is killed
STOP_GRACE = 120

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: what ReFrame says at the end of a run that the nightly's verdict needs
NOTES = {
    "stored": re.compile(r"Current session stored with UUID: (\S+)"),
    "store_failed": re.compile(r"failed to store results in the database: (.*)"),
    "report_failed": re.compile(r"failed to generate report in (.*)"),
    "error": re.compile(r"^ERROR: (.*)"),
}


def lmod_cmd():
    if os.environ.get("LMOD_CMD"):
        return os.environ["LMOD_CMD"]
    for c in LMOD_CMD_DEFAULTS:
        if os.path.exists(c):
            return c
    raise IostackError("Lmod not found: install it (Debian: apt-get install lmod) or set LMOD_CMD")


#: where runs write instead of <tree>/reframe (`nightly --state`: a read-only tree, such as
#: a release mounted from its image)
STATE_ENV = "IOSTACK_STATE"


def state_dir(root_dir: pathlib.Path) -> pathlib.Path:
    """Where a run on `root_dir` writes its stage, output, perflogs and reports."""
    moved = os.environ.get(STATE_ENV)
    return pathlib.Path(moved) if moved else root_dir / "reframe"


def use_state_dir(state: pathlib.Path) -> None:
    """Runs of this process write under `state`, their results DB too (unless
    RFM_SQLITE_DB_FILE says where)."""
    os.environ[STATE_ENV] = str(state)
    os.environ.setdefault("RFM_SQLITE_DB_FILE", str(state / "results.db"))


def environment(root_dir: pathlib.Path) -> dict:
    modulepath = str(root_dir / "modulefiles" / "Core")
    if os.environ.get("MODULEPATH"):
        modulepath += ":" + os.environ["MODULEPATH"]
    env = {
        "LMOD_CMD": lmod_cmd(),
        "MODULEPATH": modulepath,
        # ReFrame's configuration, the checks and their jobs import this checkout's iostack
        # and iostack_rfm, whichever the venv has installed
        "PYTHONPATH": os.pathsep.join(filter(None, [paths.job_pythonpath(),
                                                    os.environ.get("PYTHONPATH")])),
        "IOSTACK_RFM_STATE": state_dir(root_dir),
        # the deployment the checks test (the smoke check looks for its module tree)
        "IOSTACK_ROOT": root_dir,
    }
    # a release's sessions go in its deployment's one results DB, beside the other releases'
    db = layout.release_results_db(root_dir)
    if db:
        env["RFM_SQLITE_DB_FILE"] = db
    return env


def command(system: str, root_dir: pathlib.Path, mode=None) -> list:
    exe: pathlib.Path | str = paths.venv() / "bin" / "reframe"
    if not pathlib.Path(exe).exists():
        found = shutil.which("reframe")
        if not found:
            raise IostackError("ReFrame not found: run bin/iostack setup")
        exe = found
    cmd = [exe, "-C", paths.REFRAME_CONFIG, "--system", system, "--prefix", state_dir(root_dir)]
    return cmd + (["--mode", mode] if mode else [])


def _env(root_dir, env_extra) -> dict:
    return {**environment(root_dir), **(env_extra or {})}


class Listing(NamedTuple):
    rc: int
    #: check classes ReFrame loaded and the mode selects, on any partition
    checks: set[str]
    #: first line of each "skipping test file" warning: a check file that failed to load
    skipped: list[str]
    #: ReFrame's error line when it refused to start (unknown system, bad mode)
    error: str


def list_checks(system: str, root_dir: pathlib.Path, mode=None, env_extra=None,
                select=(), partitions=False) -> Listing:
    """The check classes a mode loads on a system, on every partition and environment
    (`--list --skip-system-check --skip-prgenv-check`), or with `partitions` only those
    with a test case on the system's own partitions and environments; `select`: ReFrame's
    selection options (-n NAME)."""
    skips = [] if partitions else ["--skip-system-check", "--skip-prgenv-check"]
    cmd = command(system, root_dir, mode) + ["--list", *skips, "--nocolor", *select]
    proc = process.capture(cmd, env_extra=_env(root_dir, env_extra))
    out = _ANSI.sub("", proc.stdout + proc.stderr)
    error = next((m.group(1).strip() for m in re.finditer(r"ERROR: (.*)", out)), "")
    return Listing(proc.returncode, set(re.findall(r"^- (\w+)", out, re.M)),
                   re.findall(r"WARNING: (skipping test file .*)", out), error)


class Outcome(NamedTuple):
    rc: int
    #: the first match of each of NOTES in ReFrame's output
    notes: dict[str, str]
    #: the deadline came first: ReFrame was interrupted (its jobs cancelled)
    timed_out: bool


def reframe(system: str, root_dir: pathlib.Path, extra=(), mode=None, env_extra=None,
            deadline: float | None = None, pass_fds=()) -> Outcome:
    """`reframe -r`, its output passed through as it comes; at `deadline` (time.monotonic())
    it gets SIGINT, so that it cancels its jobs, and is killed STOP_GRACE seconds later."""
    cmd = command(system, root_dir, mode) + ["-r", *extra]
    proc = process.start(cmd, env_extra=_env(root_dir, env_extra), text=True, errors="replace",
                         stdout=process.PIPE, stderr=process.STDOUT, pass_fds=pass_fds)
    notes: dict[str, str] = {}

    stdout = proc.stdout
    assert stdout is not None   # stdout=PIPE

    def relay():
        for line in stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            plain = _ANSI.sub("", line).strip()
            for key, pattern in NOTES.items():
                m = pattern.search(plain)
                if m and key not in notes:
                    notes[key] = m.group(1)

    reader = threading.Thread(target=relay, daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
    except process.TimeoutExpired:
        timed_out = True
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(STOP_GRACE)
        except process.TimeoutExpired:
            proc.kill()
            proc.wait()
    reader.join(10)
    return Outcome(proc.returncode, notes, timed_out)
