"""Run external commands so that an admin sees, and can re-run, exactly what ran: every
command is printed as a shell line (`+ cd DIR && VAR=value cmd args`) before it starts.

- `run`: the command's output passes through as it comes (optionally kept too);
- `capture`: a query whose output is data (stdout and stderr kept, nothing passed through);
- `start`: a long-running child the caller watches (ReFrame within its deadline).

This is the one module that starts processes (ruff's banned-api rule, ruff.toml, keeps the
rest of the library from calling subprocess directly). Standard library only."""
from __future__ import annotations

import logging
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence

from iostack.core.errors import Failed

log = logging.getLogger(__name__)

CompletedProcess = subprocess.CompletedProcess
TimeoutExpired = subprocess.TimeoutExpired
PIPE, STDOUT, DEVNULL = subprocess.PIPE, subprocess.STDOUT, subprocess.DEVNULL


class CommandFailed(Failed):
    def __init__(self, cmd, rc, stderr: str | None = None):
        super().__init__(f"command failed with exit code {rc}: {shlex.join(map(str, cmd))}")
        self.rc = rc
        #: what it said on stderr, when that was kept
        self.stderr = stderr


def show(cmd, env_extra: Mapping | None = None, cwd=None, env_remove: Iterable[str] = ()):
    """Print a command as a shell line, with the environment it adds or removes and its
    directory."""
    prefix = ""
    if cwd:
        prefix += f"cd {shlex.quote(str(cwd))} && "
    removed = sorted(env_remove)
    if removed:
        prefix += "env " + " ".join(f"-u {shlex.quote(k)}" for k in removed) + " "
    if env_extra:
        prefix += " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env_extra.items()) + " "
    log.info("+ " + prefix + shlex.join(map(str, cmd)), extra={"bare": True})


def environment(env_extra: Mapping | None = None, env_remove: Iterable[str] = ()) -> dict:
    """This process's environment, without `env_remove`, with `env_extra` added."""
    removed = set(env_remove)
    env = {k: v for k, v in os.environ.items() if k not in removed}
    env.update({k: str(v) for k, v in (env_extra or {}).items()})
    return env


def _argv(cmd: Sequence) -> list[str]:
    return [str(c) for c in cmd]


def run(cmd, env_extra=None, cwd=None, check=True, capture=False, capture_stderr=False):
    """Run a command after showing it. capture_stderr keeps stderr for the caller (to sum up
    an error in one line) while still passing it through as it comes."""
    show(cmd, env_extra, cwd)
    env = environment(env_extra)
    if not capture_stderr:
        proc = subprocess.run(_argv(cmd), env=env, cwd=cwd, text=True,
                              stdout=subprocess.PIPE if capture else None)
    else:
        with subprocess.Popen(_argv(cmd), env=env, cwd=cwd, text=True,
                              stdout=subprocess.PIPE if capture else None,
                              stderr=subprocess.PIPE) as child:
            collected: list[str] = []
            reader = threading.Thread(target=_tee, args=(child.stderr, collected))
            reader.start()
            stdout = child.stdout.read() if capture and child.stdout else None
            reader.join()
            child.wait()
        proc = subprocess.CompletedProcess(child.args, child.returncode, stdout,
                                           "".join(collected))
    if check and proc.returncode != 0:
        raise CommandFailed(cmd, proc.returncode, proc.stderr)
    return proc


def capture(cmd, env_extra=None, cwd=None, check=False, env_remove: Iterable[str] = (),
            timeout: float | None = None, input=None, text: bool = True) -> subprocess.CompletedProcess:
    """Run a query after showing it: its stdout and stderr are kept (bytes with
    text=False), nothing is passed through. check raises CommandFailed with its stderr.
    A command that does not exist is exit status 127, as in a shell; one past `timeout`
    raises TimeoutExpired."""
    show(cmd, env_extra, cwd, env_remove)
    try:
        proc = subprocess.run(_argv(cmd), env=environment(env_extra, env_remove), cwd=cwd,
                              capture_output=True, text=text, timeout=timeout, input=input)
    except FileNotFoundError as e:
        if e.filename != str(cmd[0]):
            raise
        message = f"{cmd[0]}: {e.strerror}\n"
        proc = subprocess.CompletedProcess(_argv(cmd), 127, "" if text else b"",
                                           message if text else message.encode())
    if check and proc.returncode != 0:
        stderr = proc.stderr if text else proc.stderr.decode(errors="replace")
        raise CommandFailed(cmd, proc.returncode, stderr)
    return proc


def start(cmd, env_extra=None, cwd=None, env_remove: Iterable[str] = (),
          **popen) -> subprocess.Popen:
    """Start a command after showing it; the caller waits for it (Popen's own keywords:
    stdout, stderr, pass_fds, text, ...)."""
    show(cmd, env_extra, cwd, env_remove)
    return subprocess.Popen(_argv(cmd), env=environment(env_extra, env_remove), cwd=cwd, **popen)


def become(cmd, env_extra: Mapping | None = None, env_remove: Iterable[str] = ()) -> None:
    """Replace this process with `cmd` (shown first), this environment without
    `env_remove` and with `env_extra` on top: what it exits with is the command's. Never
    returns."""
    env = environment(env_extra, env_remove)
    # name only what this environment had: the shown line is what differs
    show(cmd, env_extra, env_remove=[k for k in env_remove if k in environment()
                                     and k not in env])
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe(str(cmd[0]), _argv(cmd), env)


def _tee(stream, collected):
    for line in stream:
        sys.stderr.write(line)
        sys.stderr.flush()
        collected.append(line)
