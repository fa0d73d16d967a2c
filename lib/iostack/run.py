"""Run external commands so that an admin sees, and can re-run, exactly what ran."""
import os
import shlex
import subprocess
import sys
import threading


class CommandFailed(RuntimeError):
    def __init__(self, cmd, rc, stderr=None):
        super().__init__(f"command failed with exit code {rc}: {shlex.join(map(str, cmd))}")
        self.rc = rc
        #: what the command wrote to stderr, when run() was asked to keep it
        self.stderr = stderr or ""


def show(cmd, env_extra=None, cwd=None):
    """Print a command as a shell line, with the environment it adds and its directory."""
    prefix = ""
    if cwd:
        prefix += f"cd {shlex.quote(str(cwd))} && "
    if env_extra:
        prefix += " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env_extra.items()) + " "
    print("+ " + prefix + shlex.join(map(str, cmd)), flush=True)


def run(cmd, env_extra=None, cwd=None, check=True, capture=False, capture_stderr=False):
    """Run a command after showing it. capture_stderr keeps stderr for the caller (to sum up
    an error in one line) while still passing it through as it comes."""
    show(cmd, env_extra, cwd)
    env = dict(os.environ)
    env.update({k: str(v) for k, v in (env_extra or {}).items()})
    if not capture_stderr:
        proc = subprocess.run(list(map(str, cmd)), env=env, cwd=cwd, text=True,
                              stdout=subprocess.PIPE if capture else None)
    else:
        with subprocess.Popen(list(map(str, cmd)), env=env, cwd=cwd, text=True,
                              stdout=subprocess.PIPE if capture else None,
                              stderr=subprocess.PIPE) as child:
            collected = []
            reader = threading.Thread(target=_tee, args=(child.stderr, collected))
            reader.start()
            stdout = child.stdout.read() if capture else None
            reader.join()
            child.wait()
        proc = subprocess.CompletedProcess(child.args, child.returncode, stdout,
                                           "".join(collected))
    if check and proc.returncode != 0:
        raise CommandFailed(cmd, proc.returncode, proc.stderr)
    return proc


def _tee(stream, collected):
    for line in stream:
        sys.stderr.write(line)
        sys.stderr.flush()
        collected.append(line)


def die(message, rc=2):
    print(f"iostack: error: {message}", file=sys.stderr)
    raise SystemExit(rc)
