"""The host slot: timed checks get the host to themselves, where a partition's jobs share one
host with each other and with ReFrame's builds (the `local` and `local-slurm` systems, CI
nodes). Standard library only.

ReFrame 4.10 can keep a test off shared nodes (`exclusive_access`, Slurm's --exclusive) but
has no way to keep other tests or its local builds from running beside one under the async
policy. So every job of such a partition, run or build, starts by taking a shared lock on
one file of the session (`share_host`, in the partition's prepare_cmds), and a job tagged
`performance` turns it into an exclusive one before its first command (`TAKE_HOST`, added
by IostackMixin): a timed job waits until every other job has ended and nothing starts
beside it until it ends. Untimed jobs still share the host with each other.

ReFrame's own means were weighed and do not give the same guarantee: a partition's
`max_jobs: 1` bounds the tests active on that partition only, and `local-cluster`'s two
partitions (nps1, nps2) share this one host; `--exec-policy=serial` would keep timed jobs
alone, but it also runs untimed jobs and builds one after another, which the slot lets
share the host.

Every job says so on its stderr, so the waits are visible and the exclusivity testable:
    host-slot: shared from <unix time>
    host-slot: waiting from <unix time>        (timed jobs: shared lock given up)
    host-slot: exclusive from <unix time>      (timed jobs)
    host-slot: released at <unix time>
"""
from __future__ import annotations

import itertools
import re

FD = 9
_STAMP = 'echo "host-slot: {what} $(date +%s.%N)" >&2'


def share_host(state_dir) -> str:
    """The prepare command of a partition whose jobs share the host: a shared lock on
    <state_dir>/host-slot.lock, held until the job's script exits."""
    return (f"exec {FD}>>'{state_dir}/host-slot.lock' && flock -s {FD} && "
            f"export IOSTACK_HOST_SLOT_FD={FD} && {_STAMP.format(what='shared from')} && "
            f"trap '{_STAMP.format(what='released at')}' EXIT")


#: a timed job's first command: the host slot to itself (nothing where there is no slot)
TAKE_HOST = ('if [ -n "${IOSTACK_HOST_SLOT_FD:-}" ]; then '
             + _STAMP.format(what='waiting from')
             + ' && flock -x "$IOSTACK_HOST_SLOT_FD" && ' + _STAMP.format(what='exclusive from')
             + '; fi')

_LINE = re.compile(r'^host-slot: (shared from|waiting from|exclusive from|released at) '
                   r'([0-9.]+)$', re.M)


def held(text: str) -> list[tuple[str, float, float]]:
    """The intervals one job held the slot, from its stderr: (mode, from, to) with mode
    'shared' or 'exclusive'. A timed job holds it shared until it asks for it exclusively
    (flock gives up the shared lock while it waits), then exclusively."""
    stamps = [(what.split()[0], float(t)) for what, t in _LINE.findall(text)]
    return [(mode, start, end) for (mode, start), (_, end) in itertools.pairwise(stamps)
            if mode in ('shared', 'exclusive')]


def company(jobs: dict[str, str], timed) -> list[str]:
    """Every job that held the slot while a timed one was measuring: `jobs` maps each
    job's name to its stderr, `timed` names the timed ones. A timed job measures while it
    holds the slot exclusively, or, had it never taken it so, while it held it at all."""
    problems = []
    for name in timed:
        spans = held(jobs[name])
        for _, start, end in [s for s in spans if s[0] == 'exclusive'] or spans:
            problems += [f'{other} held the host ({mode}, {s:.3f} to {e:.3f}) while {name} '
                         f'measured ({start:.3f} to {end:.3f})'
                         for other, text in jobs.items() if other != name
                         for mode, s, e in held(text) if s < end and start < e]
    return problems
