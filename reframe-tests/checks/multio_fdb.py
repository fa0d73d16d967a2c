"""MultIO into FDB: the IFS I/O path of OpenIFS 48r1, run on real GRIB ([OIFS-HECToR], §3).

OpenIFS writes its FDB output (namelist LFDBOP) through MultIO's IFS interface: per encoded
field IMULTIO_WRITE(grib, words), then IMULTIO_FLUSH (ifs-source
ifsaux/module/fdbsubs_mod.F90); MultIO hands each message to the sinks its configuration
names, here FDB. multio 1.5.1's own program `multio-sink FILE` makes exactly these two
calls on a file's first message. MultioBitIdentityCheck writes every message of a GRIB
input through it (iostack_rfm.jobs.multio split: a file per message), retrieves the fields from
FDB by MARS request (iostack_rfm.jobs.fdbretrieve) and with `fdb-read --extract`, and compares
them with the input field by field (iostack_rfm.jobs.gribcompare: full MARS keys, bytes,
sha256, grib_compare), as FdbBitIdentityCheck does for fdb-write. Inputs are that check's:
gribgen's synthetic GRIB2 set and the published GRIB1/GRIB2 sample sets (iostack.regression.samples).

Two negative controls on every input prove the comparison can fail:
- flip-one-bit: one bit of one retrieved message's packed data is flipped: exactly that
  message must differ (the --extract copy stays identical as a control);
- missing-field: one message is never given to MultIO: it must be missing from both
  retrievals, and every other message identical.

multio-hammer's throughput is measured beside fdb-hammer's, at the same durability:
MultioHammerThroughputCheck in checks/fdb_throughput.py.

The check runs the deployed multio through its module (environment feature `multio`);
nothing is built here.
"""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (parameter, performance_function, run_after,
                                   run_before, sanity_function, variable)

from iostack.regression import samples
from iostack_rfm import context
from iostack_rfm.base import IostackMixin

# gribgen's field set: t/u/v/z on `nlevels` pressure levels and 2t/msl, per step
GRIBGEN_PL_PARAMS, GRIBGEN_SFC_PARAMS = 4, 2


@rfm.simple_test
class MultioBitIdentityCheck(IostackMixin, rfm.RunOnlyRegressionTest):
    descr = ('GRIB written through MultIO (imultio_write_, as OpenIFS 48r1) into FDB and '
             'retrieved is bit-identical')
    valid_systems = ['+fdb']
    valid_prog_environs = ['+fdb']
    app_features = ['multio']
    grib_input = parameter(['synthetic', *samples.GRIB_SETS])
    scenario = parameter(['archive', 'flip-one-bit', 'missing-field'])
    nsteps = variable(int, value=3)
    nlevels = variable(int, value=3)
    #: 0-based index of the message a control corrupts or leaves out
    control_message = variable(int, value=5)
    executable = 'python3'
    keep_files = ['compare-request.out', 'compare-extract.out', 'multio-sink.log']
    tags = {'bit-identity', 'fdb', 'multio', 'ci', 'deploy', 'nightly'}

    @property
    def input_messages(self):
        if self.grib_input == 'synthetic':
            return self.nsteps * (GRIBGEN_PL_PARAMS * self.nlevels + GRIBGEN_SFC_PARAMS)
        return samples.GRIB_SETS[self.grib_input].messages

    @property
    def expected_archived(self):
        return self.input_messages - (self.scenario == 'missing-field')

    @run_after('setup')
    def find_input(self):
        if self.grib_input in samples.GRIB_SETS:
            try:
                for source in {part.source for part in samples.GRIB_SETS[self.grib_input].parts}:
                    samples.fetch(source, context.settings().samples)
            except samples.SampleError as e:
                self.skip(f'{self.grib_input}: {e}')

    def _write_input(self):
        if self.grib_input == 'synthetic':
            return f'python3 -m iostack_rfm.jobs.gribgen direct.grib {self.nsteps} {self.nlevels}'
        return (f'python3 -m iostack.regression.samples grib-set {self.grib_input} direct.grib '
                f'--samples {context.settings().samples}')

    @run_before('run')
    def set_job(self):
        self.env_vars.update({'FDB5_CONFIG_FILE': '$PWD/fdb-config.yaml',
                              'MULTIO_CONFIG_FILE': '$PWD/multio-sinks.yaml'})
        skip = f' --skip {self.control_message}' if self.scenario == 'missing-field' else ''
        feed = ('for f in fields/*.grib; do multio-sink "$f" >> multio-sink.log 2>&1 '
                '|| exit 1; done')
        self.prerun_cmds = [
            'python3 -m iostack.deployment.fdbconfig --root fdb-root --out fdb-config.yaml',
            self._write_input(),
            f'python3 -m iostack_rfm.jobs.multio split direct.grib fields{skip}',
            'python3 -m iostack_rfm.jobs.multio sinks multio-sinks.yaml',
            self.bounded(f"bash -c '{feed}'", name='multio-sink') + '; echo "multio-sink rc=$?"',
            'echo "multio-sink files=$(ls fields | wc -l)"',
            self.bounded('python3 -m iostack_rfm.jobs.fdbretrieve direct.grib by-request.grib',
                         name='fdbretrieve') + '; echo "fdbretrieve rc=$?"',
            self.bounded('fdb-read --extract direct.grib by-extract.grib > '
                         'fdb-read-extract.log 2>&1') + '; echo "fdb-read extract rc=$?"',
        ]
        if self.scenario == 'flip-one-bit':
            self.prerun_cmds.append('python3 -m iostack_rfm.jobs.gribcompare flip-bit by-request.grib '
                                    f'--message {self.control_message}')
        self.executable_opts = ['-m', 'iostack_rfm.jobs.gribcompare', 'compare', 'direct.grib',
                                'by-request.grib', '> compare-request.out; '
                                'echo "compare request rc=$?"']
        self.postrun_cmds = ['python3 -m iostack_rfm.jobs.gribcompare compare direct.grib '
                             'by-extract.grib > compare-extract.out; '
                             'echo "compare extract rc=$?"']

    def _result(self, which):
        return sn.extractsingle(r'RESULT=(\S+)', f'compare-{which}.out', 1)

    def _count(self, which, key):
        return sn.extractsingle(rf'\b{key}=(\d+)', f'compare-{which}.out', 1, int)

    @sanity_function
    def validate(self):
        n = self.input_messages
        fed = [
            sn.assert_found(r'^multio-sink rc=0$', self.stdout),
            sn.assert_eq(sn.extractsingle(r'^multio-sink files=(\d+)', self.stdout, 1, int),
                         self.expected_archived),
            sn.assert_eq(sn.extractsingle(r'reference=\S+ messages=(\d+)', 'compare-request.out',
                                          1, int), n),
            sn.assert_found(r'^fdbretrieve rc=0$', self.stdout),
            sn.assert_found(r'^fdb-read extract rc=0$', self.stdout),
        ]
        if self.scenario == 'archive':
            return sn.all(fed + [
                sn.assert_eq(self._result(w), 'IDENTICAL') for w in ('request', 'extract')] + [
                sn.assert_eq(self._count(w, 'identical'), n) for w in ('request', 'extract')] + [
                sn.assert_found(r'^compare request rc=0$', self.stdout)])
        if self.scenario == 'flip-one-bit':
            return sn.all(fed + [
                sn.assert_eq(self._result('extract'), 'IDENTICAL'),
                sn.assert_eq(self._count('extract', 'identical'), n),
                sn.assert_eq(self._result('request'), 'DIFFERENT'),
                sn.assert_eq(self._count('request', 'differing'), 1),
                sn.assert_eq(self._count('request', 'identical'), n - 1),
                sn.assert_found(r'grib_compare=DIFFERENT', 'compare-request.out'),
                sn.assert_found(r'^compare request rc=1$', self.stdout)])
        # missing-field: the message MultIO never saw is missing from both retrievals
        return sn.all(fed + [
            sn.assert_eq(self._result(w), 'DIFFERENT') for w in ('request', 'extract')] + [
            sn.assert_eq(self._count(w, 'missing'), 1) for w in ('request', 'extract')] + [
            sn.assert_eq(self._count(w, 'identical'), n - 1) for w in ('request', 'extract')] + [
            sn.assert_eq(self._count(w, 'extra'), 0) for w in ('request', 'extract')] + [
            sn.assert_found(r'^compare request rc=1$', self.stdout)])

    @performance_function('messages')
    def messages_identical_by_request(self):
        return self._count('request', 'identical')

    @performance_function('messages')
    def messages_identical_by_extract(self):
        return self._count('extract', 'identical')
