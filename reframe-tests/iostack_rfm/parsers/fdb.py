"""FDB throughput ([OIFS-HECToR]'s FDB tuning and NWRTOUT writer experiment): what the check's
measurement (iostack_rfm/templates/fdb-throughput.sh) leaves, read into figures and
verdicts. Standard library only.

For every writer count N and repetition R the measurement leaves raw-N-R.json (fio, one
job per writer) and, for each FDB writer W, fdb-N-R-W.out (`Name: value` statistics, as
fdb-hammer and fdb-archive-bench print them) and fdb-N-R-W.time (bash `time`: real, user,
sys seconds); the end-sync variants add raw-N-R-sync.time and fdb-N-R-sync.time. Its
untimed audit pass leaves strace logs of the same commands: audit-raw.strace,
audit-fdb-W.strace and, for the end-sync variants, audit-{raw,fdb}-sync.strace.

Both sides' throughput is defined alike: all writers' bytes over the slowest writer's time
(fio's runtime per job; FDB's "Writing duration", which leaves out fdb-hammer's GRIB
encoding), plus the final syncfs where the variant ends with one.

The profile (PROFILE_STEPS > 0) leaves, for one FDB writer at S and 2S steps,
profile-S.strace (`strace -f -c`), profile-S.rusage (page faults, context switches) and the
writer's statistics (profile-S-syscalls.out, profile-S-rusage.out): what one more field
costs is the difference between the two sizes over the difference in fields.
"""
from __future__ import annotations

import collections
import json
import math
import os
import re
import statistics

MiB = 1024 * 1024
GiB = 1024 * MiB

#: how each variant makes FDB's data durable, and so what its raw write does
DURABILITY = {
    # FDB's default: synchronous writes, data fdatasync'd at every flush
    'sync-flush': {'async_write': False, 'data_sync_on_flush': True, 'end_sync': False},
    # synchronous writes, no data sync at flush: both sides end with a syncfs
    'sync-end': {'async_write': False, 'data_sync_on_flush': False, 'end_sync': True},
    # eckit's asynchronous writer: FDB 5.10.8 with eckit 1.20 issues no data sync at all in
    # this mode, whatever fdbDataSyncOnFlush says (every job's sync audit checks it, whichever
    # FDB), so both sides end with a syncfs
    'async-end': {'async_write': True, 'data_sync_on_flush': False, 'end_sync': True},
}


def stat(text: str, name: str) -> float:
    """A `Name: value` statistic (nan where absent)."""
    m = re.search(rf'^{re.escape(name)}:\s*(\S+)', text, re.MULTILINE)
    return float(m.group(1)) if m else math.nan


def hammer_stats(texts: list[str], name: str) -> list[float]:
    """A statistic of each writer's output."""
    return [stat(t, name) for t in texts]


def times(text: str) -> dict[str, float]:
    """bash `time` with TIMEFORMAT='real=%3R user=%3U sys=%3S'."""
    found = dict(re.findall(r'\b(real|user|sys)=([0-9.]+)', text))
    if set(found) != {'real', 'user', 'sys'}:
        raise ValueError(f'no real/user/sys times in {text[:80]!r}')
    return {k: float(v) for k, v in found.items()}


def fio_jobs(text: str) -> list[dict]:
    """Each fio job's write statistics: io_bytes and runtime (ms)."""
    return [job['write'] for job in json.loads(text)['jobs']]


def raw_rate(fio_text: str, sync_text: str | None = None) -> float:
    """MiB/s of all fio jobs: their bytes over the slowest job's runtime (plus syncfs)."""
    jobs = fio_jobs(fio_text)
    seconds = max(j['runtime'] for j in jobs) / 1000
    if sync_text is not None:
        seconds += times(sync_text)['real']
    return sum(j['io_bytes'] for j in jobs) / seconds / MiB


def fdb_rate(writer_texts: list[str], sync_text: str | None = None) -> float:
    """MiB/s of all FDB writers: their bytes over the slowest one's writing duration (plus
    syncfs)."""
    seconds = max(hammer_stats(writer_texts, 'Writing duration'))
    if sync_text is not None:
        seconds += times(sync_text)['real']
    return sum(hammer_stats(writer_texts, 'Bytes written')) / seconds / MiB


def cpu_per_gib(writer_texts: list[str], time_texts: list[str]) -> float:
    """CPU seconds (user + sys of every writer process, every thread) per GiB archived."""
    cpu = sum(t['user'] + t['sys'] for t in map(times, time_texts))
    return cpu / (sum(hammer_stats(writer_texts, 'Bytes written')) / GiB)


def written_bytes_problems(fio_text: str, writer_texts: list[str]) -> list[str]:
    """[] when fio job W wrote as many bytes as FDB writer W archived."""
    raw = [j['io_bytes'] for j in fio_jobs(fio_text)]
    archived = [int(b) if b == b else None for b in hammer_stats(writer_texts, 'Bytes written')]
    if raw == archived:
        return []
    return [f'fio jobs wrote {raw} bytes, FDB writers archived {archived}']


# -- sync audit (strace -f -y -e trace=fdatasync,fsync,sync,syncfs) ---------------------

_SYNC_CALL = re.compile(r'^(?:\d+\s+)?(fdatasync|fsync|syncfs|sync)\((?:\d+<([^>]*)>)?')


def sync_calls(text: str) -> collections.Counter:
    """(call, file) -> how many times strace saw it start (a call strace splits into
    `<unfinished ...>` and `<... resumed>` counts once; `sync()` has no file)."""
    calls: collections.Counter[tuple[str, str]] = collections.Counter()
    for line in text.splitlines():
        m = _SYNC_CALL.match(line.strip())
        if m:
            calls[(m.group(1), m.group(2) or '')] += 1
    return calls


def file_kind(path: str) -> str:
    """What a synced file is: FDB's data, index or toc, a raw write's file, else other."""
    name = os.path.basename(path)
    if name.startswith('raw-w'):
        return 'raw'
    if name.endswith('.data'):
        return 'data'
    if name.endswith('.index'):
        return 'index'
    return 'toc' if name == 'toc' else 'other'


def data_syncs_per_file(calls: collections.Counter) -> list[int]:
    """Sorted counts of fdatasync + fsync per data file (FDB's .data, fio's raw-w*)."""
    per_file: collections.Counter[str] = collections.Counter()
    for (call, path), n in calls.items():
        if call in ('fdatasync', 'fsync') and file_kind(path) in ('data', 'raw'):
            per_file[path] += n
    return sorted(per_file.values())


def file_system_syncs(calls: collections.Counter) -> int:
    return sum(n for (call, _), n in calls.items() if call in ('syncfs', 'sync'))


def sync_problems(raw_traces: list[str], fdb_traces: list[str], raw_end: str = '',
                  fdb_end: str = '', *, durability: str, flushes: list[int]) -> list[str]:
    """[] when both sides made their data durable as the variant says.

    `flushes`: each FDB writer's flush count (its output's "Flushes"). sync-flush: every
    data file, FDB's and fio's alike, had one fdatasync/fsync per flush of its writer, and
    nobody synced the file system. End variants: no data file was synced, and each side's
    end is exactly one syncfs."""
    end_sync = DURABILITY[durability]['end_sync']
    expected = [] if end_sync else sorted(flushes)
    problems = []
    for side, traces, end in (('raw', raw_traces, raw_end), ('fdb', fdb_traces, fdb_end)):
        calls = sum((sync_calls(t) for t in traces), collections.Counter())
        got = data_syncs_per_file(calls)
        if got != expected:
            problems.append(f'{side}: data syncs per file {got}, expected {expected} '
                            f'({durability})')
        if file_system_syncs(calls):
            problems.append(f'{side}: {file_system_syncs(calls)} file-system syncs while '
                            'writing')
        ends = file_system_syncs(sync_calls(end)) if end_sync else 0
        if ends != (1 if end_sync else 0):
            problems.append(f'{side}: {ends} syncfs at the end, expected '
                            f'{1 if end_sync else 0}')
    return problems


# -- figures over repetitions -------------------------------------------------------------

def write_figures(raw_jsons: list[str], writer_outs: list[list[str]], raw_syncs: list[str],
                  fdb_syncs: list[str]) -> dict[str, float]:
    """Medians over repetitions of FDB's and raw MiB/s and of each repetition's FDB/raw
    ratio (each FDB pass against the raw pass just before it: both saw the same load).
    Per repetition: fio's JSON, the FDB writers' outputs, and both sides' syncfs times
    (empty lists where the variant has no end sync)."""
    passes = []
    for i, (raw, outs) in enumerate(zip(raw_jsons, writer_outs, strict=True)):
        passes.append((fdb_rate(outs, fdb_syncs[i] if fdb_syncs else None),
                       raw_rate(raw, raw_syncs[i] if raw_syncs else None)))
    ratios = [f / r for f, r in passes]
    return {
        'fdb_write_bw': statistics.median(f for f, _ in passes),
        'raw_write_bw': statistics.median(r for _, r in passes),
        'fdb_write_ratio': statistics.median(ratios),
        # (max - min) / median over the repetitions, beside the medians
        'fdb_write_ratio_spread': _spread(ratios),
        'fdb_write_bw_spread': _spread([f for f, _ in passes]),
    }


def _spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


def median_cpu_per_gib(writer_outs: list[list[str]], writer_times: list[list[str]]) -> float:
    """Median over repetitions of cpu_per_gib."""
    return statistics.median(cpu_per_gib(o, t) for o, t in zip(writer_outs, writer_times,
                                                                 strict=True))


def best_writers(counts: list[int], ratios: list[float]) -> tuple[int, float]:
    """The writer count with the highest FDB/raw ratio (the fewest writers on a tie)."""
    best = max(range(len(counts)), key=lambda i: (ratios[i], -counts[i]))
    return counts[best], ratios[best]


# -- per field ------------------------------------------------------------------------------

def seconds_per_field(raw_jsons: list[str], writer_outs: list[list[str]], raw_syncs: list[str],
                      fdb_syncs: list[str]) -> dict[str, float]:
    """Medians over repetitions of FDB's microseconds per field (the slowest writer's time,
    end sync included, over its share of the fields) and of what that is beyond the raw
    write of the same bytes in the pass just before it."""
    fdb_us, over_us = [], []
    for i, (raw, outs) in enumerate(zip(raw_jsons, writer_outs, strict=True)):
        fields = sum(hammer_stats(outs, 'Fields written')) / len(outs)
        total = sum(hammer_stats(outs, 'Bytes written'))
        fdb = total / fdb_rate(outs, fdb_syncs[i] if fdb_syncs else None) / MiB
        raw_s = total / raw_rate(raw, raw_syncs[i] if raw_syncs else None) / MiB
        fdb_us.append(fdb / fields * 1e6)
        over_us.append((fdb - raw_s) / fields * 1e6)
    return {'us_per_field': statistics.median(fdb_us),
            'overhead_us_per_field': statistics.median(over_us)}


def strace_summary(text: str) -> dict[str, int]:
    """Calls per system call from `strace -c` (its table: % time, seconds, usecs/call,
    calls, [errors,] syscall; the total row left out)."""
    calls: dict[str, int] = {}
    for m in re.finditer(r'^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$', text, re.M):
        if m.group(2) != 'total':
            calls[m.group(2)] = calls.get(m.group(2), 0) + int(m.group(1))
    return calls


def rusage(text: str) -> dict[str, int]:
    """The profile's `minflt=.. majflt=.. nvcsw=.. nivcsw=..` line."""
    found = {k: int(v) for k, v in re.findall(r'\b(minflt|majflt|nvcsw|nivcsw)=(\d+)', text)}
    if len(found) != 4:
        raise ValueError(f'no rusage in {text[:80]!r}')
    return found


def per_field(small_out: str, small: dict[str, int], big_out: str, big: dict[str, int]
              ) -> dict[str, float]:
    """What one more field costs: the difference of two counts (a pass and one with more
    fields) over the difference of their fields."""
    extra = stat(big_out, 'Fields written') - stat(small_out, 'Fields written')
    if not extra > 0:
        raise ValueError('the profile\'s second pass wrote no more fields than its first')
    return {k: (big.get(k, 0) - small.get(k, 0)) / extra for k in sorted(set(small) | set(big))}


def profile_figures(small_syscalls_out: str, small_strace: str, big_syscalls_out: str,
                    big_strace: str, small_rusage_out: str, small_rusage: str,
                    big_rusage_out: str, big_rusage: str) -> dict[str, float]:
    """The profile's per-field figures: system calls (all, and the data-path ones by name:
    write, fdatasync, fsync, openat, close, lseek), page faults (minor + major)."""
    calls = per_field(small_syscalls_out, strace_summary(small_strace),
                      big_syscalls_out, strace_summary(big_strace))
    usage = per_field(small_rusage_out, rusage(small_rusage), big_rusage_out, rusage(big_rusage))
    figures = {'syscalls_per_field': sum(calls.values()),
               'page_faults_per_field': usage['minflt'] + usage['majflt']}
    for name in ('write', 'fdatasync', 'fsync', 'openat', 'close', 'lseek'):
        figures[f'{name}_per_field'] = calls.get(name, 0.0)
    return figures
