"""Two tiny timed checks for tests/integration/test_reframe_cpu_frequency.py: each takes its
references through IostackMixin (IOSTACK_RFM_REFERENCES names a directory with a
cpufreq_checks.yaml); the second's job is capped at another frequency after the mixin asked
for its references' one, as a site module loaded late would do."""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import performance_function, run_before, sanity_function

from iostack_rfm.base import IostackMixin


@rfm.simple_test
class CpuFreqCheck(IostackMixin, rfm.RunOnlyRegressionTest):
    valid_systems = ['*']
    valid_prog_environs = ['builtin']
    tags = {'performance'}
    executable = 'echo'
    executable_opts = ['ratio=1.0']

    @sanity_function
    def validate(self):
        return sn.assert_found(r'^ratio=', self.stdout)

    @performance_function('ratio')
    def ratio(self):
        return sn.extractsingle(r'^ratio=(\S+)$', self.stdout, 1, float)


@rfm.simple_test
class CpuFreqCappedCheck(CpuFreqCheck):
    @run_before('run')
    def cap_later(self):
        self.env_vars['SLURM_CPU_FREQ_REQ'] = '2000000'
