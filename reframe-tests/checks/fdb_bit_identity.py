"""FDB bit-identity ([OIFS-HECToR], section 3).

GRIB fields written directly to a file must come back from FDB bit for bit: archive them with
fdb-write, retrieve them by MARS request (iostack_rfm.jobs.fdbretrieve: one request per MARS key
set of the input) and with --extract, and compare field by field (iostack_rfm.jobs.gribcompare:
full MARS keys, raw bytes, sha256, grib_compare) with exact counts. The FDB is whichever the
environment provides (Debian's 5.10.8 in `builtin`, the stack's module in `stack`).

Inputs (parameter `grib_input`):
- synthetic: gribgen's deterministic GRIB2 set (pressure levels and surface, 3 steps),
  encoded by the environment's ecCodes (iostack_rfm.jobs.gribgen);
- published-grib1, published-grib2: published GRIB from PyPI packages' sample data
  (iostack.regression.samples: ERA5 ensemble members of 2 dates and 2 times on pressure levels,
  surface fields, seasonal ensembles; GRIB2 on pressure and model levels and the surface);
- site: the site's own model output, a GRIB file or a directory of them, named by
  IOSTACK_SITE_GRIB (like IOSTACK_OIFS_EXPERIMENTS for the OpenIFS check); without it
  there is no `site` case. Its parameters may need the site's own ecCodes definitions
  (sites/<site>.yaml grib_definitions, on ecCodes' path in the site's environments): before
  fdb-write, iostack_rfm.jobs.gribdefs stops the job with one line where ecCodes cannot
  name a parameter (FDB would archive it as param=0).

Where the FDB cannot expand a request (5.10.8 on stream=enda: "cannot find a context to
expand 'param'"), fdbretrieve names the stream in the job's output and retrieves the same
request with --raw; `requests_retrieved_raw` counts them.

Two negative controls on every input prove the comparison can fail:
- flip-one-bit: one bit of one retrieved message's packed data is flipped; exactly that
  message must be reported different (the --extract copy stays identical as a control);
- empty-retrieve: the same requests against an empty FDB make fdb-read exit 0 with an empty
  file; the comparison must refuse it.
"""
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (
    parameter,
    performance_function,
    run_after,
    run_before,
    sanity_function,
    variable,
)
from reframe.core.logging import getlogger

from iostack.regression import samples
from iostack_rfm import context
from iostack_rfm.base import IostackMixin

#: a site's own GRIB output (file or directory), compared as input `site`
SITE_GRIB = os.environ.get('IOSTACK_SITE_GRIB', '')
# The field set gribgen writes: t/u/v/z on `nlevels` pressure levels and 2t/msl, per step
GRIBGEN_PL_PARAMS, GRIBGEN_SFC_PARAMS = 4, 2
#: what fdb-write (5.10.8 and 5.13) prints when it has archived its input
FDB_ARCHIVED = r'FDB archive (\d+) messages?\b'


@rfm.simple_test
class FdbBitIdentityCheck(IostackMixin, rfm.RunOnlyRegressionTest):
    descr = 'GRIB fields archived into FDB and retrieved are bit-identical ([OIFS-HECToR] §3)'
    valid_systems = ['+fdb']
    valid_prog_environs = ['+fdb']
    grib_input = parameter(['synthetic', *samples.GRIB_SETS] + (['site'] if SITE_GRIB else []))
    scenario = parameter(['archive', 'flip-one-bit', 'empty-retrieve'])
    nsteps = variable(int, value=3)
    nlevels = variable(int, value=3)
    #: the site's own GRIB output (file or directory) for grib_input=site
    site_grib = variable(str, value=SITE_GRIB)
    #: 0-based index of the retrieved message the flip-one-bit control corrupts
    flipped_message = variable(int, value=5)
    executable = 'python3'
    tags = {'bit-identity', 'fdb', 'ci', 'deploy', 'nightly'}

    @property
    def expected_messages(self):
        """How many messages the input has, where that is known before the run."""
        if self.grib_input == 'synthetic':
            return self.nsteps * (GRIBGEN_PL_PARAMS * self.nlevels + GRIBGEN_SFC_PARAMS)
        if self.grib_input in samples.GRIB_SETS:
            return samples.GRIB_SETS[self.grib_input].messages
        return None

    @run_after('setup')
    def find_input(self):
        if self.grib_input == 'site':
            self.flipped_message = 0    # the one message a site's output surely has
        elif self.grib_input in samples.GRIB_SETS:
            sources = {part.source for part in samples.GRIB_SETS[self.grib_input].parts}
            try:
                for source in sources:
                    samples.fetch(source, context.settings().samples)
            except samples.SampleError as e:
                self.skip(f'{self.grib_input}: {e}')

    def _write_input(self):
        if self.grib_input == 'synthetic':
            return f'python3 -m iostack_rfm.jobs.gribgen direct.grib {self.nsteps} {self.nlevels}'
        if self.grib_input == 'site':
            return f"python3 -m iostack_rfm.jobs.gribcompare gather '{self.site_grib}' direct.grib"
        return (f'python3 -m iostack.regression.samples grib-set {self.grib_input} direct.grib '
                f'--samples {context.settings().samples}')

    @run_before('run')
    def set_job(self):
        self.env_vars['FDB5_CONFIG_FILE'] = '$PWD/fdb-config.yaml'
        retrieve_from = ''
        self.prerun_cmds = [
            'python3 -m iostack.deployment.fdbconfig --root fdb-root --out fdb-config.yaml',
            self._write_input(),
        ]
        if self.grib_input == 'site':
            # a site's GRIB may need its own ecCodes definitions (sites/<site>.yaml
            # grib_definitions): without them FDB would archive its fields as param=0, so the
            # job stops at gribdefs' one line instead
            self.prerun_cmds.append('python3 -m iostack_rfm.jobs.gribdefs check direct.grib '
                                    '|| exit 1')
        self.prerun_cmds += [
            self.bounded('fdb-write direct.grib'),
        ]
        if self.scenario == 'empty-retrieve':
            self.prerun_cmds.append(
                'python3 -m iostack.deployment.fdbconfig --root empty-root --out empty-config.yaml')
            retrieve_from = 'FDB5_CONFIG_FILE=$PWD/empty-config.yaml '
        self.prerun_cmds += [
            retrieve_from + self.bounded('python3 -m iostack_rfm.jobs.fdbretrieve direct.grib '
                                         'by-request.grib', name='fdbretrieve') +
            '; echo "fdbretrieve rc=$?"',
            # fdb-read prints every request it extracts: keep them out of the job's output
            self.bounded('fdb-read --extract direct.grib by-extract.grib > fdb-read-extract.log 2>&1') +
            '; echo "fdb-read extract rc=$?"',
        ]
        if self.scenario == 'flip-one-bit':
            self.prerun_cmds.append(
                'python3 -m iostack_rfm.jobs.gribcompare flip-bit by-request.grib '
                f'--message {self.flipped_message}')
        expect = f'--expect {self.expected_messages}' if self.expected_messages else ''
        self.executable_opts = ['-m', 'iostack_rfm.jobs.gribcompare', 'compare',
                                'direct.grib', 'by-request.grib', expect,
                                '> compare-request.out; echo "compare request rc=$?"']
        self.postrun_cmds = [
            'python3 -m iostack_rfm.jobs.gribcompare compare direct.grib by-extract.grib '
            f'{expect} > compare-extract.out; echo "compare extract rc=$?"',
        ]

    def _result(self, which):
        return sn.extractsingle(r'RESULT=(\S+)', f'compare-{which}.out', 1)

    def _count(self, which, key):
        return sn.extractsingle(rf'\b{key}=(\d+)', f'compare-{which}.out', 1, int)

    def _reference_messages(self):
        return sn.extractsingle(r'reference=\S+ messages=(\d+)', 'compare-extract.out', 1, int)

    @sanity_function
    def validate(self):
        n = self._reference_messages()
        written = [
            # the site's GRIB: ecCodes names every parameter (gribdefs' ERROR line says which not)
            sn.assert_found(r'^gribdefs: OK', self.stdout,
                            msg='ecCodes cannot name a parameter of the site GRIB: see the '
                                '`gribdefs: ERROR` line of the job output'),
        ] if self.grib_input == 'site' else []
        written += [
            sn.assert_gt(n, 0),
            # fdb-write says `FDB archive 1 message` for one field, `N messages` for more
            sn.assert_eq(sn.extractsingle(FDB_ARCHIVED, self.stdout, 1, int), n),
            sn.assert_found(r'fdbretrieve rc=0', self.stdout),
            sn.assert_found(r'fdb-read extract rc=0', self.stdout),
            # the --extract copy is the control in every scenario
            sn.assert_eq(self._result('extract'), 'IDENTICAL'),
            sn.assert_eq(self._count('extract', 'identical'), n),
        ]
        if self.expected_messages:
            written.append(sn.assert_eq(n, self.expected_messages))
        if self.scenario == 'archive':
            return sn.all(written + [
                sn.assert_eq(self._result('request'), 'IDENTICAL'),
                sn.assert_eq(self._count('request', 'identical'), n),
                sn.assert_found(r'compare request rc=0', self.stdout),
            ])
        if self.scenario == 'flip-one-bit':
            return sn.all(written + [
                sn.assert_eq(self._result('request'), 'DIFFERENT'),
                sn.assert_eq(self._count('request', 'differing'), 1),
                sn.assert_eq(self._count('request', 'identical'), n - 1),
                sn.assert_found(r'grib_compare=DIFFERENT', 'compare-request.out'),
                sn.assert_found(r'compare request rc=1', self.stdout),
            ])
        return sn.all(written + [
            sn.assert_eq(self._result('request'), 'DIFFERENT'),
            sn.assert_found(r'candidate is empty', 'compare-request.out'),
            sn.assert_found(r'compare request rc=1', self.stdout),
        ])

    @run_before('performance')
    def name_what_this_fdb_cannot_expand(self):
        """The streams retrieved with --raw, in ReFrame's own output too."""
        output = os.path.join(self.stagedir, self.stdout.evaluate())
        if not os.path.isfile(output):      # a dry run writes no output
            return
        with open(output) as f:
            for line in f:
                if line.startswith('fdbretrieve: request') and 'cannot expand' in line:
                    getlogger().warning(f'{self.display_name}: {line.strip()}')

    @performance_function('messages')
    def messages_identical_by_request(self):
        return self._count('request', 'identical')

    @performance_function('messages')
    def messages_identical_by_extract(self):
        return self._count('extract', 'identical')

    @performance_function('requests')
    def requests_retrieved_raw(self):
        """Requests this FDB could not expand, retrieved with --raw instead (informational)."""
        return sn.extractsingle(r'fdbretrieve: requests=\d+ expanded=\d+ raw=(\d+)',
                                self.stdout, 1, int)
