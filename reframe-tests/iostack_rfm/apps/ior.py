"""IOR and mdtest checks' common part (seeds 001 and 004): their command lines, what their
summaries must show for a run to count, and optional Darshan instrumentation.

Seed 001 (the GBmolDD audit) found the code's one-file-per-process output spending ever more
time on metadata as the process count grew, and profiled it with Darshan; the checks measure
the same patterns with IOR (file per process against one shared file) and mdtest (files in
one directory against a directory per process), and can run them under Darshan
(LD_PRELOAD of darshan-runtime's libdarshan.so, one log per step, read with darshan-parser).
"""
import re

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after

from iostack_rfm.parsers import ior as iorparse
from iostack_rfm.parsers import mdtest as mdparse

MiB = 1 << 20
_SIZE = re.compile(r'^(\d+)([kmgt]?)$', re.I)


def size_bytes(text):
    """IOR's size syntax (1g, 512m, 47008) in bytes."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f'not an IOR size: {text!r}')
    return int(m[1]) * 1024 ** ' kmgt'.index(m[2].lower() or ' ')


def ior_problems(text, *, tasks, file_per_process, block, segments, repetitions, api):
    """Why an IOR run's summary does not show the run asked for ([] if it does)."""
    problems = []
    if re.search(r'(?im)incorrect data|^ERROR', text):
        problems.append('IOR reported data errors')
    result = iorparse.parse(text)
    for op in ('write', 'read'):
        rows = result.rows(op)
        if len(rows) != 1:
            problems.append(f'{len(rows)} {op} summary rows')
            continue
        row = rows[0]
        expected = {
            '#Tasks': tasks, 'reps': repetitions, 'fPP': int(file_per_process),
            'segcnt': segments, 'blksiz': size_bytes(block),
        }
        for column, want in expected.items():
            if int(float(row.columns[column])) != want:
                problems.append(f'{op} {column}={row.columns[column]}, expected {want}')
        aggregate = tasks * segments * size_bytes(block) / MiB
        if abs(row.number('aggs(MiB)') - aggregate) > 0.05 + 1e-9 * aggregate:
            problems.append(f'{op} aggs(MiB)={row.columns["aggs(MiB)"]}, expected {aggregate:.1f}')
        if row.columns['API'].upper() != api.upper().replace('-', ''):
            problems.append(f'{op} API {row.columns["API"]}, expected {api}')
    return problems


def mdtest_problems(text, *, tasks, files_per_task, iterations,
                    operations=('File creation', 'File stat', 'File read', 'File removal')):
    problems = []
    m = re.search(r'^(\d+) tasks, (\d+) files', text, re.M)
    if not m:
        problems.append('no "N tasks, M files" line')
    elif (int(m[1]), int(m[2])) != (tasks, tasks * files_per_task):
        problems.append(f'{m[1]} tasks and {m[2]} files, expected {tasks} and '
                        f'{tasks * files_per_task}')
    result = mdparse.parse(text)
    if result.iterations != iterations:
        problems.append(f'{result.iterations} iterations summarised, expected {iterations}')
    for op in operations:
        if op not in result.rates:
            problems.append(f'no {op} rate')
        elif result.rates[op].min <= 0:
            problems.append(f'{op} rate {result.rates[op].min} in an iteration')
    return problems


@sn.deferrable
def ior_summary(path, operation, column):
    with open(path) as f:
        return iorparse.parse(f.read()).rows(operation)[0].number(column)


@sn.deferrable
def mdtest_rate(path, operation):
    with open(path) as f:
        return mdparse.parse(f.read()).mean(operation)


@sn.deferrable
def darshan_counter(path, counter):
    """A `darshan-parser --total` counter, e.g. total_POSIX_F_META_TIME."""
    with open(path) as f:
        m = re.search(rf'^{re.escape(counter)}:\s*(\S+)', f.read(), re.M)
    if not m:
        raise ValueError(f'{counter} not in {path}')
    return float(m[1])


class DarshanOption(rfm.RegressionTestPlugin):
    # for AppCheck subclasses (require_app_features)
    """Parameter `darshan`: the True variant runs each instrumented step under Darshan and
    needs an environment with feature `darshan` (darshan-runtime and darshan-util)."""

    darshan = parameter([False, True])

    @run_after('init')
    def need_darshan(self):
        if self.darshan:
            self.require_app_features(['darshan'])

    def darshan_prefix(self, step):
        """Environment assignments that put the step's program under Darshan."""
        if not self.darshan:
            return ''
        return ('LD_PRELOAD="$(dirname "$(command -v darshan-config)")/../lib/libdarshan.so" '
                f'DARSHAN_LOGFILE="$PWD/{step}.darshan" ')

    def darshan_report(self, step):
        return (f'test -s {step}.darshan && '
                f'darshan-parser --total {step}.darshan > {step}.darshan.txt')
