"""Run a site's ReFrame regression with the repository's configuration: list what a mode
would load (`--describe`, ReFrame's JSON of the selected tests), and run it within a
deadline. What the verdict decides on comes through ReFrame's public interfaces: the run's
JSON report (`--report-file`) and the results DB (`--describe-stored-sessions`); its
printed lines are kept only to explain a failure in the admin's words (NOTES), and the
warning naming a check file that did not load, which ReFrame says nowhere else: both read
only from the ReFrame releases this was checked with (KNOWN_REFRAME)."""
from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import sys
import threading
import time
from typing import NamedTuple

from iostack.core import paths, process
from iostack.core.errors import IostackError
from iostack.core.settings import Settings
from iostack.site.target import Target

LMOD_CMD_DEFAULTS = ("/usr/share/lmod/lmod/libexec/lmod", "/opt/lmod/lmod/libexec/lmod")
#: after SIGINT at the deadline, ReFrame cancels its jobs; this long, then it is killed
STOP_GRACE = 120

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: ReFrame releases whose printed warnings and errors this module reads (requirements.txt
#: pins 4.10.4); another is refused in one line before anything runs
KNOWN_REFRAME = ("4.10.",)
#: what ReFrame prints that explains a failure (not what decides it)
NOTES = {
    "store_failed": re.compile(r"failed to store results in the database: (.*)"),
    "report_failed": re.compile(r"failed to generate report in (.*)"),
    "error": re.compile(r"^ERROR: (.*)"),
}


def lmod_cmd(settings: Settings) -> str:
    if settings.lmod_cmd:
        return settings.lmod_cmd
    for c in LMOD_CMD_DEFAULTS:
        if os.path.exists(c):
            return c
    raise IostackError("Lmod not found: install it (Debian: apt-get install lmod) or set LMOD_CMD")


def environment(target: Target) -> dict:
    """What a ReFrame run on the target is told (iostack.core.settings.CHILD_VARIABLES):
    the tree under test and its deployment, the site, where to write, the results DB."""
    settings = target.settings
    modulepath = ":".join(filter(None, [str(target.tree / "modulefiles" / "Core"),
                                        settings.modulepath]))
    return {
        "LMOD_CMD": lmod_cmd(settings),
        "MODULEPATH": modulepath,
        # ReFrame's configuration, the checks and their jobs import this checkout's iostack
        # and iostack_rfm, whichever the venv has installed
        "PYTHONPATH": os.pathsep.join(filter(None, [paths.job_pythonpath(),
                                                    settings.pythonpath])),
        "IOSTACK_RFM_STATE": target.state_dir,
        "IOSTACK_RELEASE": target.tree,
        "IOSTACK_ROOT": target.root,
        "IOSTACK_SITE": target.site,
        "IOSTACK_RFM_REFERENCES": settings.references,
        "IOSTACK_SAMPLES": settings.samples,
        # every release's sessions go in its deployment's one results DB
        "RFM_SQLITE_DB_FILE": target.results_db,
    }


def executable(settings: Settings) -> str:
    exe = settings.venv / "bin" / "reframe"
    if exe.exists():
        return str(exe)
    found = shutil.which("reframe")
    if not found:
        raise IostackError("ReFrame not found: run bin/iostack setup")
    return found


@functools.cache
def version(exe: str) -> str:
    """What `reframe -V` says (`4.10.4`)."""
    return process.capture([exe, "-V"]).stdout.strip()


def require_known_version(settings: Settings) -> None:
    exe = executable(settings)
    found = version(exe)
    if not found.startswith(KNOWN_REFRAME):
        raise IostackError(f"ReFrame {found or '(no version)'} at {exe}: iostack reads its "
                           f"warnings as ReFrame {', '.join(v + 'x' for v in KNOWN_REFRAME)} "
                           "prints them (lib/iostack/regression/reframe.py KNOWN_REFRAME); "
                           "run bin/iostack setup for the pinned one")


def command(target: Target, mode=None) -> list:
    exe = executable(target.settings)
    cmd = [exe, "-C", target.reframe_config, "--system", target.reframe_system,
           "--prefix", target.state_dir]
    return cmd + (["--mode", mode] if mode else [])


def _env(target: Target, env_extra) -> dict:
    return {**environment(target), **(env_extra or {})}


class Listing(NamedTuple):
    rc: int
    #: check classes ReFrame loaded and the mode selects, on any partition
    checks: set[str]
    #: first line of each "skipping test file" warning ReFrame printed (none under
    #: --describe: load_warnings finds them)
    skipped: list[str]
    #: ReFrame's error line when it refused to start (unknown system, bad mode)
    error: str


def list_checks(target: Target, mode=None, env_extra=None, select=(),
                partitions=False) -> Listing:
    """The check classes a mode loads on the target's system, on every partition and
    environment (`--describe --skip-system-check --skip-prgenv-check`: ReFrame's JSON), or
    with `partitions` only those with a test case on the system's own partitions and
    environments; `select`: ReFrame's selection options (-n NAME)."""
    require_known_version(target.settings)
    skips = [] if partitions else ["--skip-system-check", "--skip-prgenv-check"]
    cmd = command(target, mode) + ["--describe", *skips, "--nocolor", *select]
    proc = process.capture(cmd, env_extra=_env(target, env_extra))
    said = _ANSI.sub("", proc.stderr + ("" if proc.returncode == 0 else proc.stdout))
    error = next((m.group(1).strip() for m in re.finditer(r"ERROR: (.*)", said)), "")
    try:
        described = json.loads(proc.stdout) if proc.returncode == 0 else []
    except json.JSONDecodeError:
        described = []
        error = error or f"reframe --describe printed no JSON: {proc.stdout[:200]!r}"
    return Listing(proc.returncode, {t["@class"] for t in described},
                   re.findall(r"WARNING: (skipping test file .*)", said), error)


def load_warnings(target: Target, mode=None, env_extra=None) -> list[str]:
    """The "skipping test file" warnings of a mode's check files: `--describe` keeps
    ReFrame's log at ERROR, so they come from a listing (`-l`) run for this alone."""
    cmd = command(target, mode) + ["-l", "--skip-system-check", "--skip-prgenv-check",
                                   "--nocolor"]
    proc = process.capture(cmd, env_extra=_env(target, env_extra))
    return re.findall(r"WARNING: (skipping test file .*)", _ANSI.sub("", proc.stdout + proc.stderr))


class Outcome(NamedTuple):
    rc: int
    #: the first match of each of NOTES in ReFrame's output
    notes: dict[str, str]
    #: the deadline came first: ReFrame was interrupted (its jobs cancelled)
    timed_out: bool


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def reframe(target: Target, extra=(), mode=None, env_extra=None,
            deadline: float | None = None, pass_fds=()) -> Outcome:
    """`reframe -r`, its output passed through as it comes; at `deadline` (time.monotonic())
    it gets SIGINT, so that it cancels its jobs, and is killed STOP_GRACE seconds later."""
    cmd = command(target, mode) + ["-r", *extra]
    # SIGINT at its default in ReFrame even where ours is ignored (a script's background
    # job inherits it ignored, and a program cannot trap what it was started ignoring)
    proc = process.start(cmd, env_extra=_env(target, env_extra), text=True, errors="replace",
                         stdout=process.PIPE, stderr=process.STDOUT, pass_fds=pass_fds,
                         preexec_fn=_default_sigint)
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
