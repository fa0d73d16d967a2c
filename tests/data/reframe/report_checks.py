"""Tiny checks whose real ReFrame run reports (tests/data/reframe/report/) the unit tests of
what reads stored sessions read (the report page, record-baseline): they print the values
each session is given (`-S CHECK.VAR=VALUE`) and take their references the way every
iostack check does, through IostackMixin from references/report_checks.yaml (with
IOSTACK_RFM_REFERENCES=tests/data/reframe/references). How each report was made, and its
options: tests/support/reframe_runs.py (RECIPES); tests/integration/test_reframe_report_data.py
runs them again and checks the committed reports still have the shape ReFrame writes."""
import os

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import (parameter, performance_function, run_after, run_before,
                                   sanity_function, variable)

from iostack_rfm.base import IostackMixin


class _Echo(IostackMixin, rfm.RunOnlyRegressionTest):
    """A job that prints `name=value` lines, then `<done>` (markup in ReFrame's text: the
    sanity pattern a failure reason quotes); its performance variables read them."""
    valid_systems = ['*']
    valid_prog_environs = ['builtin']
    executable = 'printf'
    #: the lines the job prints
    printed = variable(typ.List[str], value=[])

    @run_before('run')
    def print_lines(self):
        self.executable_opts = ["'%s\\n'", *self.printed, "'<done>'"]

    @sanity_function
    def validate(self):
        return sn.assert_found(r'^<done>$', self.stdout)

    def value(self, name):
        return sn.extractsingle(rf'^{name}=(\S+)$', self.stdout, 1, float)


@rfm.simple_test
class TinyThroughputCheck(_Echo):
    """Recorded references for local:default (a band on bw, a lower bound on ratio)."""
    size = parameter(['small'])
    bw = variable(float, value=200.0)
    ratio = variable(float, value=0.3)

    @run_after('init')
    def set_lines(self):
        self.printed = [f'bw={self.bw}', f'ratio={self.ratio}']

    @performance_function('MiB/s')
    def fdb_write_bw(self):
        return self.value('bw')

    @performance_function('ratio')
    def fdb_write_ratio(self):
        return self.value('ratio')


@rfm.simple_test
class TinyNewSystemCheck(TinyThroughputCheck):
    """The same, on a partition without a baseline: the gated ratio gets the reference no
    value meets, and fails."""


@rfm.simple_test
class TinySmokeCheck(_Echo):
    """No performance variables."""


@rfm.simple_test
class TinyWriterScalingCheck(_Echo):
    """A sweep within one job: ratio_writers_<n> for each count, and their best."""
    writers = variable(typ.List[int], value=[1, 2])
    ratios = variable(typ.List[float], value=[0.2, 0.3])

    @run_after('init')
    def set_lines(self):
        self.printed = [f'ratio_writers_{n}={r}' for n, r in zip(self.writers, self.ratios, strict=True)]

    @run_before('performance')
    def set_perf_variables(self):
        for n in self.writers:
            self.perf_variables[f'fdb_write_ratio_writers_{n}'] = sn.make_performance_function(
                self.value(f'ratio_writers_{n}'), 'ratio')
        self.perf_variables['best_ratio'] = sn.make_performance_function(
            sn.max([self.value(f'ratio_writers_{n}') for n in self.writers]), 'ratio')


@rfm.simple_test
class TinyRankScalingCheck(_Echo):
    """A sweep over ranks, one line per model: seconds_batching_ranks_<n> = scale / n."""
    model = parameter(['inmcm6p', 'inmcm6m'])
    ranks = variable(typ.List[int], value=[1, 2, 4])

    @run_after('init')
    def set_lines(self):
        scale = {'inmcm6p': 1.0, 'inmcm6m': 4.0}[self.model]
        self.printed = [f'seconds_ranks_{n}={scale / n}' for n in self.ranks]

    @run_before('performance')
    def set_perf_variables(self):
        for n in self.ranks:
            self.perf_variables[f'seconds_batching_ranks_{n}'] = sn.make_performance_function(
                self.value(f'seconds_ranks_{n}'), 's')


@rfm.simple_test
class TinyFlakyCheck(_Echo):
    """Fails its first attempt and passes the retry (`--max-retries 1`): the first attempt
    leaves a file beside the stage directories of its attempts, which the second finds."""

    @run_before('run')
    def first_attempt_fails(self):
        marker = os.path.join(os.path.dirname(self.stagedir), 'TinyFlakyCheck-attempted')
        self.executable = 'sh'
        self.executable_opts = ['-c', f"'test -e {marker} && echo \"<done>\"; touch {marker}'"]
