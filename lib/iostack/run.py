"""Run external commands so that an admin sees, and can re-run, exactly what ran."""
import os
import shlex
import subprocess
import sys


class CommandFailed(RuntimeError):
    def __init__(self, cmd, rc):
        super().__init__(f"command failed with exit code {rc}: {shlex.join(map(str, cmd))}")
        self.rc = rc


def show(cmd, env_extra=None, cwd=None):
    """Print a command as a shell line, with the environment it adds and its directory."""
    prefix = ""
    if cwd:
        prefix += f"cd {shlex.quote(str(cwd))} && "
    if env_extra:
        prefix += " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env_extra.items()) + " "
    print("+ " + prefix + shlex.join(map(str, cmd)), flush=True)


def run(cmd, env_extra=None, cwd=None, check=True, capture=False, capture_stderr=False):
    """Run a command after showing it. capture_stderr keeps stderr for the caller and still
    shows it (after the command ends), so an error can be summed up in one line."""
    show(cmd, env_extra, cwd)
    env = dict(os.environ)
    env.update({k: str(v) for k, v in (env_extra or {}).items()})
    proc = subprocess.run(list(map(str, cmd)), env=env, cwd=cwd, text=True,
                          stdout=subprocess.PIPE if capture else None,
                          stderr=subprocess.PIPE if capture_stderr else None)
    if capture_stderr and proc.stderr:
        sys.stderr.write(proc.stderr)
    if check and proc.returncode != 0:
        raise CommandFailed(cmd, proc.returncode)
    return proc


def die(message, rc=2):
    print(f"iostack: error: {message}", file=sys.stderr)
    raise SystemExit(rc)
