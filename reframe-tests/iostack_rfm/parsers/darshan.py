"""Darshan's I/O profile of one program run, as darshan-util's `darshan-parser --total`
prints it (`total_<MODULE>_<COUNTER>: <value>`, one line per counter summed over the log's
files; Darshan's own documented output, not its binary log). Standard library only."""
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
}
#: operation counts (not times): the same on every run of the same program and input
COUNTS = ('posix_bytes_written', 'posix_bytes_read', 'posix_writes', 'posix_reads',
          'posix_opens', 'posix_syncs', 'mpiio_bytes_written', 'mpiio_writes',
          'stdio_bytes_written', 'stdio_writes')


def totals(text: str) -> dict[str, float]:
    """{counter: value} of `darshan-parser --total`; ValueError when it printed none (no
    log, or a log of no instrumented module)."""
    found = {name: float(value) for name, value in _TOTAL.findall(text)}
    if not found:
        raise ValueError('darshan-parser printed no totals: was the program run under '
                         'darshan-runtime (LD_PRELOAD), and did it exit normally?')
    return found


def profile(text: str) -> dict[str, float]:
    """PROFILE's figures of one run; a module the program did not use counts 0."""
    found = totals(text)
    return {figure: sum(found.get(c, 0.0) for c in counters)
            for figure, counters in PROFILE.items()}


def figure(text: str, name: str) -> float:
    return profile(text)[name]


def counts_differ(*texts: str) -> list[str]:
    """The operation counts that are not the same in every run's profile: [] when Darshan's
    counts of repeated runs agree (they are deterministic for a deterministic program)."""
    runs = [profile(t) for t in texts]
    return [c for c in COUNTS if len({r[c] for r in runs}) > 1]
