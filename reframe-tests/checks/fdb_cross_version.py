"""FDB across versions: what one FDB archives, another retrieves bit for bit.

Every FDB site upgrades one day, with years of archives on disk and jobs of both versions
running beside each other. This check archives the bit-identity check's GRIB set with the
environment's FDB and retrieves it with the other one the environment names
(`extras['other_fdb_bin']`, e.g. Debian's 5.10.8 beside the Spack-built 5.13.106), then the
reverse, each into its own FDB root with the writer's schema. Every retrieved field must be
bit-identical to the one written (gribcompare: keys, bytes, sha256, grib_compare), with exact
counts, and the two FDBs must report different versions (else nothing was crossed).
"""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import performance_function, run_before, sanity_function

from iostack_rfm.base import IostackMixin

PL_PARAMS = '130/131/132/129'
SFC_PARAMS = '167/151'
MARS_BASE = 'class=od,expver=0001,stream=oper,date=20240101,time=0000,domain=g,type=fc'
NSTEPS, NLEVELS = 3, 3
EXPECTED = NSTEPS * (4 * NLEVELS + 2)
# direction: (FDB that archives, FDB that retrieves)
DIRECTIONS = {'new-to-old': ('$NEW', '$OLD'), 'old-to-new': ('$OLD', '$NEW')}


@rfm.simple_test
class FdbCrossVersionCheck(IostackMixin, rfm.RunOnlyRegressionTest):
    descr = "fields one FDB version archives come back bit-identical from another"
    valid_systems = ['+fdb']
    valid_prog_environs = ['+fdb +fdb-pair']
    executable = 'true'
    tags = {'bit-identity', 'fdb', 'upgrade', 'deploy', 'nightly'}

    @run_before('run')
    def set_job(self):
        other = self.current_environ.extras['other_fdb_bin']
        steps = '/'.join(str(6 * s) for s in range(NSTEPS))
        request = (f'retrieve,{MARS_BASE},levtype=pl,levelist=1000/850/700,param={PL_PARAMS},'
                   f'step={steps}\nretrieve,{MARS_BASE},levtype=sfc,param={SFC_PARAMS},'
                   f'step={steps}')
        self.prerun_cmds = [
            # the environment's FDB, and the other one by its directory
            'NEW=$(dirname "$(command -v fdb-write)")',
            f'OLD={other}',
            'echo "fdb versions: new=$($NEW/fdb-info --version) old=$($OLD/fdb-info --version)"',
            f'python3 -m iostack_rfm.jobs.gribgen direct.grib {NSTEPS} {NLEVELS}',
            f"printf '%s\\n' '{request}' > retrieve.req",
            # an FDB's schema: its prefix's, else the system's (Debian's /etc/fdb/schema)
            'schema_of() { for f in "$1/../etc/fdb/schema" "$1/../share/fdb/schema" '
            '/etc/fdb/schema; do [ -r "$f" ] && { echo "$f"; return; }; done; }',
        ]
        for direction, (writer, reader) in DIRECTIONS.items():
            # the writer's schema, which the reader reads with the rest of the root
            self.prerun_cmds += [
                f'FDB5_SCHEMA=$(schema_of {writer}) python3 -m iostack.deployment.fdbconfig '
                f'--root root-{direction} --out {direction}.yaml',
                f'FDB5_CONFIG_FILE={direction}.yaml {writer}/fdb-write direct.grib',
                f'FDB5_CONFIG_FILE={direction}.yaml {reader}/fdb-read retrieve.req '
                f'{direction}.grib; echo "{direction} read rc=$?"',
                f'python3 -m iostack_rfm.jobs.gribcompare compare direct.grib {direction}.grib '
                f'--expect {EXPECTED} > compare-{direction}.out; echo "{direction} compare rc=$?"',
            ]

    def _count(self, direction):
        return sn.extractsingle(r'\bidentical=(\d+)', f'compare-{direction}.out', 1, int)

    @sanity_function
    def validate(self):
        versions = sn.extractsingle(r'fdb versions: new=(\S+) old=(\S+)', self.stdout, 0)
        new = sn.extractsingle(r'fdb versions: new=(\S+) old=', self.stdout, 1)
        old = sn.extractsingle(r'fdb versions: new=\S+ old=(\S+)', self.stdout, 1)
        checks = [sn.assert_ne(new, old, msg=f'both FDBs report one version ({versions}): '
                                             'nothing was crossed')]
        for direction in DIRECTIONS:
            checks += [
                sn.assert_found(rf'{direction} read rc=0', self.stdout),
                sn.assert_eq(sn.extractsingle(r'RESULT=(\S+)', f'compare-{direction}.out', 1),
                             'IDENTICAL', msg=f'{direction}: fields differ'),
                sn.assert_eq(self._count(direction), EXPECTED),
                sn.assert_found(rf'{direction} compare rc=0', self.stdout),
            ]
        return sn.all(checks)

    @performance_function('messages')
    def identical_new_to_old(self):
        return self._count('new-to-old')

    @performance_function('messages')
    def identical_old_to_new(self):
        return self._count('old-to-new')
