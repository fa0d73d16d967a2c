"""What a ReFrame run's checks executed, from `strace -f` of the whole run: every successful
execve, attributed to the test whose stage directory the process (or an ancestor) changed
into. The path execve names is the file the kernel ran: no guessing from job scripts.

    strace -f --seccomp-bpf -qq -e trace=execve,chdir,clone,clone3,fork,vfork -o TRACE \\
        bin/iostack nightly ...
"""
from __future__ import annotations

import re

STRACE = ["strace", "-f", "--seccomp-bpf", "-qq", "-e",
          "trace=execve,chdir,clone,clone3,fork,vfork"]

_LINE = re.compile(r"^(\d+) +(\w+)\((.*)\) += (-?\d+)")
_RESUMED = re.compile(r"^(\d+) +<\.\.\. (\w+) resumed>.*\) += (-?\d+)")
_FIRST_STRING = re.compile(r'^"((?:[^"\\]|\\.)*)"')
#: <prefix>/stage/<system>/<partition>/<environment>/<test>
_STAGE = re.compile(r"/stage/([^/]+)/([^/]+)/([^/]+)/([^/]+)")


def executions(trace: str) -> dict[tuple[str, str], set[str]]:
    """{(environment, test stage name): paths executed} of a trace."""
    owner: dict[int, tuple[str, str]] = {}
    pending: dict[int, tuple[str, str]] = {}     # unfinished calls: pid -> (call, args)
    found: dict[tuple[str, str], set[str]] = {}
    for line in trace.splitlines():
        if line.endswith("<unfinished ...>"):
            m = re.match(r"^(\d+) +(\w+)\((.*) <unfinished \.\.\.>$", line)
            if m:
                pending[int(m.group(1))] = (m.group(2), m.group(3))
            continue
        m = _LINE.match(line)
        if m:
            pid, call, args, result = int(m.group(1)), m.group(2), m.group(3), int(m.group(4))
        else:
            m = _RESUMED.match(line)
            if not m or int(m.group(1)) not in pending:
                continue
            pid, result = int(m.group(1)), int(m.group(3))
            call, args = pending.pop(pid)
        if result < 0:
            continue
        if call in ("clone", "clone3", "fork", "vfork"):
            if pid in owner:
                owner[result] = owner[pid]
        elif call == "chdir":
            path = _FIRST_STRING.match(args)
            stage = _STAGE.search(path.group(1)) if path else None
            if stage:
                owner[pid] = (stage.group(3), stage.group(4))
        elif call == "execve" and pid in owner:
            path = _FIRST_STRING.match(args)
            if path:
                found.setdefault(owner[pid], set()).add(path.group(1))
    return found


#: the job script ReFrame writes into each stage and runs (its local scheduler executes it)
_JOB_SCRIPT = re.compile(_STAGE.pattern + r"/rfm_job\.sh$")


def job_script(path: str) -> bool:
    """Whether an executed path is a stage's job script: ReFrame's, not a program built there."""
    return bool(_JOB_SCRIPT.search(path))
