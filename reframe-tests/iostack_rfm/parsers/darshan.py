"""Darshan's I/O profile of one program run, as darshan-util's `darshan-parser --total
--file` prints it (`total_<MODULE>_<COUNTER>: <value>`, one line per counter summed over the
log's files, and per module the files by kind of access, `# total: <files> <bytes>
<offset>`; Darshan's own documented output, not its binary log). Standard library only."""
import re

_TOTAL = re.compile(r'^total_([A-Z0-9]+_[A-Z0-9_]+):\s+(-?[0-9.e+-]+)$', re.MULTILINE)

#: what the report shows of each module, per run: Darshan's counters summed this way
PROFILE = {
    'posix_bytes_written': ('POSIX_BYTES_WRITTEN',),
    'posix_bytes_read': ('POSIX_BYTES_READ',),
    'posix_writes': ('POSIX_WRITES',),
    'posix_reads': ('POSIX_READS',),
    'posix_opens': ('POSIX_OPENS',),
    # fsync and fdatasync: the durability a program pays for
    'posix_syncs': ('POSIX_FSYNCS', 'POSIX_FDSYNCS'),
    'posix_seconds': ('POSIX_F_READ_TIME', 'POSIX_F_WRITE_TIME', 'POSIX_F_META_TIME'),
    'mpiio_bytes_written': ('MPIIO_BYTES_WRITTEN',),
    'mpiio_writes': ('MPIIO_INDEP_WRITES', 'MPIIO_COLL_WRITES', 'MPIIO_SPLIT_WRITES',
                     'MPIIO_NB_WRITES'),
    'stdio_bytes_written': ('STDIO_BYTES_WRITTEN',),
    'stdio_writes': ('STDIO_WRITES',),
    # access sizes: POSIX writes by size, Darshan's own buckets (0-100 bytes, 100-1K, ...)
    **{f'posix_writes_sized_{b.lower()}': (f'POSIX_SIZE_WRITE_{b}',) for b in (
        '0_100', '100_1K', '1K_10K', '10K_100K', '100K_1M', '1M_4M', '4M_10M', '10M_100M',
        '100M_1G', '1G_PLUS')},
}
#: files per module (`--file`): all it touched, and those written (write-only or read-write)
FILES = tuple(f'{m}_{k}' for m in ('posix', 'mpiio', 'stdio') for k in ('files', 'files_written'))
_MODULE = re.compile(r'^# ([\w-]+) module data$')
_FILE_KIND = re.compile(r'^# (total|write_only|read_write): (\d+) \d+ -?\d+$')
#: the operation counts: the same on every run of the same program and input, and what a
#: build's references hold to exactly (an extra write or sync is a regression). Bytes are
#: not among them: a log with times in it writes a few bytes more or fewer on a loaded node,
#: and FDB's TOC and index hold its root's path
GATED = ('posix_writes', 'posix_reads', 'posix_opens', 'posix_syncs', 'mpiio_writes',
         'stdio_writes')


def totals(text: str) -> dict[str, float]:
    """{counter: value} of `darshan-parser --total`; ValueError when it printed none (no
    log, or a log of no instrumented module)."""
    found = {name: float(value) for name, value in _TOTAL.findall(text)}
    if not found:
        raise ValueError('darshan-parser printed no totals: was the program run under '
                         'darshan-runtime (LD_PRELOAD), and did it exit normally?')
    return found


def files(text: str) -> dict[str, float]:
    """FILES of one run, from `--file`'s per-module file counts (0 where it printed none)."""
    out = dict.fromkeys(FILES, 0.0)
    module = None
    for line in text.splitlines():
        if m := _MODULE.match(line):
            module = m.group(1).lower().replace('-', '')   # MPI-IO: mpiio
        elif (m := _FILE_KIND.match(line)) and f'{module}_files' in out:
            key = f'{module}_files' if m.group(1) == 'total' else f'{module}_files_written'
            out[key] += float(m.group(2))
    return out


def profile(text: str) -> dict[str, float]:
    """PROFILE's and FILES' figures of one run; a module the program did not use counts 0."""
    found = totals(text)
    return {**{figure: sum(found.get(c, 0.0) for c in counters)
               for figure, counters in PROFILE.items()}, **files(text)}


def figure(text: str, name: str) -> float:
    return profile(text)[name]


def counts_differ(*texts: str) -> list[str]:
    """The operation counts that are not the same in every run's profile: [] when Darshan's
    counts of repeated runs agree (they are deterministic for a deterministic program)."""
    runs = [profile(t) for t in texts]
    return [c for c in GATED if len({r[c] for r in runs}) > 1]


def gated(text: str) -> dict[str, int]:
    """GATED's counts of one run's profile."""
    found = profile(text)
    return {c: int(found[c]) for c in GATED}


def moved(reference: dict, text: str) -> list[str]:
    """'count: now against reference' for each GATED count of the run that is not the
    reference's (a count the reference lacks counts from 0)."""
    now = gated(text)
    return [f'{c}: {now[c]} against {int(reference.get(c, 0))}' for c in GATED
            if now[c] != int(reference.get(c, 0))]
