"""FDB bit-identity ([OIFS-HECToR], section 3).

GRIB fields written directly to a file must come back from FDB bit for bit: archive them with
fdb-write, retrieve them with fdb-read by MARS request and with --extract, and compare message
by message (MARS keys, raw bytes, sha256 per message, grib_compare) with exact counts.

Two negative controls prove the comparison can fail:
- flip-one-bit: one bit of one retrieved message's data section is flipped; exactly that
  message must be reported different (the --extract copy stays identical as a control);
- empty-retrieve: a request that matches nothing makes fdb-read exit 0 with an empty file;
  the comparison must refuse it.
"""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (fixture, parameter, performance_function, run_before,
                                   sanity_function, variable)

from iostack_rfm.base import IostackMixin
from iostack_rfm.builds import GribGenBuild

# The field set gribgen writes: pressure-level t/u/v/z and surface 2t/msl, steps 0, 6, 12, ...
PL_PARAMS = (130, 131, 132, 129)
SFC_PARAMS = (167, 151)
LEVELS = (1000, 850, 700, 500, 250, 100)
MARS_BASE = 'class=od,expver=0001,stream=oper,date=20240101,time=0000,domain=g,type=fc'


@rfm.simple_test
class FdbBitIdentityCheck(IostackMixin, rfm.RunOnlyRegressionTest):
    descr = 'GRIB fields archived into FDB and retrieved are bit-identical ([OIFS-HECToR] §3)'
    valid_systems = ['+fdb']
    valid_prog_environs = ['+fdb']
    scenario = parameter(['archive', 'flip-one-bit', 'empty-retrieve'])
    nsteps = variable(int, value=3)
    nlevels = variable(int, value=3)
    #: 0-based index of the retrieved message the flip-one-bit control corrupts
    flipped_message = variable(int, value=5)
    gribgen = fixture(GribGenBuild, scope='environment')
    executable = 'python3'
    tags = {'bit-identity', 'fdb', 'ci', 'nightly'}

    @property
    def expected_messages(self):
        return self.nsteps * (len(PL_PARAMS) * self.nlevels + len(SFC_PARAMS))

    def _requests(self):
        steps = '/'.join(str(6 * s) for s in range(self.nsteps))
        if self.scenario == 'empty-retrieve':
            # total precipitation was never written
            return [f'retrieve,{MARS_BASE},levtype=sfc,param=228,step={steps}']
        levels = '/'.join(map(str, LEVELS[:self.nlevels]))
        return [
            f'retrieve,{MARS_BASE},levtype=pl,levelist={levels},'
            f'param={"/".join(map(str, PL_PARAMS))},step={steps}',
            f'retrieve,{MARS_BASE},levtype=sfc,param={"/".join(map(str, SFC_PARAMS))},step={steps}',
        ]

    @run_before('run')
    def set_job(self):
        gribgen = self.gribgen.program_path
        self.env_vars['FDB5_CONFIG_FILE'] = '$PWD/fdb-config.yaml'
        request = '\n'.join(self._requests())
        self.prerun_cmds = [
            'python3 -m iostack.fdbconfig --root fdb-root --out fdb-config.yaml',
            f'{gribgen} direct.grib {self.nsteps} {self.nlevels}',
            self.bounded('fdb-write direct.grib'),
            f"printf '%s\\n' '{request}' > retrieve.req",
            self.bounded('fdb-read retrieve.req by-request.grib') +
            '; echo "fdb-read request rc=$?"',
            self.bounded('fdb-read --extract direct.grib by-extract.grib') +
            '; echo "fdb-read extract rc=$?"',
        ]
        if self.scenario == 'flip-one-bit':
            self.prerun_cmds.append(
                'python3 -m iostack_rfm.gribcompare flip-bit by-request.grib '
                f'--message {self.flipped_message}')
        expect = f'--expect {self.expected_messages}'
        self.executable_opts = ['-m', 'iostack_rfm.gribcompare', 'compare',
                                'direct.grib', 'by-request.grib', expect,
                                '> compare-request.out; echo "compare request rc=$?"']
        self.postrun_cmds = [
            'python3 -m iostack_rfm.gribcompare compare direct.grib by-extract.grib '
            f'{expect} > compare-extract.out; echo "compare extract rc=$?"',
        ]

    def _result(self, which):
        return sn.extractsingle(r'RESULT=(\S+)', f'compare-{which}.out', 1)

    def _count(self, which, key):
        return sn.extractsingle(rf'\b{key}=(\d+)', f'compare-{which}.out', 1, int)

    @sanity_function
    def validate(self):
        n = self.expected_messages
        written = sn.all([
            sn.assert_found(rf'gribgen: messages={n} ', self.stdout),
            sn.assert_found(rf'FDB archive {n} messages', self.stdout),
            sn.assert_found(r'fdb-read request rc=0', self.stdout),
            sn.assert_found(r'fdb-read extract rc=0', self.stdout),
            # the --extract copy is the control in every scenario
            sn.assert_eq(self._result('extract'), 'IDENTICAL'),
            sn.assert_eq(self._count('extract', 'identical'), n),
        ])
        if self.scenario == 'archive':
            return sn.all([
                written,
                sn.assert_eq(self._result('request'), 'IDENTICAL'),
                sn.assert_eq(self._count('request', 'identical'), n),
                sn.assert_found(r'compare request rc=0', self.stdout),
            ])
        if self.scenario == 'flip-one-bit':
            return sn.all([
                written,
                sn.assert_eq(self._result('request'), 'DIFFERENT'),
                sn.assert_eq(self._count('request', 'differing'), 1),
                sn.assert_eq(self._count('request', 'identical'), n - 1),
                sn.assert_found(r'grib_compare=DIFFERENT', 'compare-request.out'),
                sn.assert_found(r'compare request rc=1', self.stdout),
            ])
        return sn.all([
            written,
            sn.assert_eq(self._result('request'), 'DIFFERENT'),
            sn.assert_found(r'candidate is empty', 'compare-request.out'),
            sn.assert_found(r'compare request rc=1', self.stdout),
        ])

    @performance_function('messages')
    def messages_identical_by_request(self):
        return self._count('request', 'identical')

    @performance_function('messages')
    def messages_identical_by_extract(self):
        return self._count('extract', 'identical')
