"""Three tiny checks whose real ReFrame run report (run-report-tiny.json) the unit tests
read instead of inventing ReFrame's report format: one passes its reference, one fails
its performance on the no-baseline reference (iostack.regression.references.NO_BASELINE),
one fails its sanity. tests/integration/test_reframe_report_data.py runs them again and
checks the committed report still has the shape ReFrame writes."""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import performance_function, sanity_function


class _Tiny(rfm.RunOnlyRegressionTest):
    valid_systems = ['*']
    valid_prog_environs = ['builtin']
    executable = 'echo'
    executable_opts = ['value=2.5']
    tags = {'tiny'}

    @performance_function('ratio')
    def ratio(self):
        return sn.extractsingle(r'value=(\S+)', self.stdout, 1, float)


@rfm.simple_test
class TinyPassCheck(_Tiny):
    reference = {'*': {'ratio': (2.5, -0.1, 0.1, 'ratio')}}

    @sanity_function
    def validate(self):
        return sn.assert_found(r'value=', self.stdout)


@rfm.simple_test
class TinyNoBaselineCheck(_Tiny):
    reference = {'*': {'ratio': (1.7976931348623157e308, 0, None, 'ratio')}}

    @sanity_function
    def validate(self):
        return sn.assert_found(r'value=', self.stdout)


@rfm.simple_test
class TinySanityFailCheck(_Tiny):
    @sanity_function
    def validate(self):
        return sn.assert_found(r'never printed', self.stdout)
