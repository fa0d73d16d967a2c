"""OpenIFS with FDB against OpenIFS without ([OIFS-HECToR], sections 3 to 5).

One job runs the same experiment twice on the same nodes: first writing GRIB files (namelist
&NAMCT0 LFDBOP=false, the default: ICMGG<exp>+<step> and ICMSH<exp>+<step> per output step),
then into FDB (LFDBOP=true). Every output file's fields are then retrieved from FDB and
compared message by message (counts, bytes, sha256, grib_compare); FDB must hold exactly
those fields and bytes (iostack_rfm.jobs.openifs compare-fdb). The speed of each run is
[OIFS-HECToR]'s metric, forecast days per wall-clock day (iostack_rfm/jobs/openifs.py: forecast
length from NODE.001_01, wall time from ifs.stat).

Parameters, as [OIFS-HECToR] section 5 tuned them (on the FDB run and the GRIB run alike, so the
pair stays comparable): the case (Table 2), the writer stride NWRTOUT (&NAMPAR1; 1 = every
task writes, `node` = one writer per node, which the seed recommends), Lustre striping of
the output directories (`lfs setstripe -c N -S size`, before the runs; a note and no
striping where there is no lfs) and the Cray hugepages module (craype-hugepages2M, the
seed's recommendation; the executable must have been linked with a hugepages module loaded
for the page size to change at run time).

References: the seed's own numbers on HECToR are in references/openifs.yaml under the
documented pseudo-system `hector:compute` (no such system exists here, so they gate nothing;
they are the expectation to compare a new site with). A site's own baseline is recorded from
its runs with `bin/iostack record-baseline`.

Inputs: the experiments (initial files ICM*<exp>INIT..., fort.4) come from ECMWF, not from
this repository: `$IOSTACK_OIFS_EXPERIMENTS/<case>/` (variable `experiments`). The `openifs`
module sets OIFS_EXEC (the Spack recipe's setup_run_environment).

OpenifsCheck is seed 000's validation with OpenIFS's own test suite, ifs-test (installed
with OpenIFS in share/openifs/ifs-test): its t21 forecast tests (test_fc, test_np2,
test_nt2), each run by ifs-test's own `ifs-run` in a test directory made as its CMake
makes it (iostack_rfm.jobs.ifstest), twice: writing GRIB files, then into FDB through MultIO
(the tests' namelists take LFDBOP from the environment). Then:
- bit-identity across releases (ifs-test's IFS_TEST_BITIDENTICAL, bin/ifs-check-bitid):
  the first run of a test on a deployment saves the model's norms (`init`) under
  <deployment root>/var/openifs-norms/<executable>/<test>, which outlives releases;
  every later release's run is checked against them (`check`); the FDB run is always
  checked against its own GRIB run's norms (FDB output must not change the model);
- the fields FDB holds against the GRIB files, bit for bit (iostack_rfm.jobs.openifs
  compare-fdb, as OpenIFSOutputCheck);
- forecast days per day of both runs.
Its input is ifs-test's data (storage.yaml: ifsdata, t21 inidata) from the directory the
site names, as a `type: file` data source of storage.yaml would: IOSTACK_OIFS_TEST_DATA
(variable `test_data`, default <deployment root>/var/ifs-test-data) holds each file under
its source_path. Nothing is downloaded; where a file is missing the check is skipped with
one line naming the directory and the entries it needs: it never passes without data.
"""
import os
import pathlib

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable

from iostack.deployment import stack
from iostack.site.target import SpackEnv
from iostack_rfm import context
from iostack_rfm.jobs import ifstest, openifs
from iostack_rfm.base import AppCheck, parsed

RUNS = ('grib', 'fdb')


@rfm.simple_test
class OpenIFSOutputCheck(AppCheck):
    descr = 'OpenIFS FDB output bit-identical to GRIB files; forecast days/day ([OIFS-HECToR])'
    valid_systems = ['+mpi']
    app_features = ['openifs']
    case = parameter(list(openifs.CASES))
    nwrtout = parameter(['1', 'node'])
    stripe = parameter(['inherit', '4x4M', '8x16M'])
    hugepages = parameter(['none', '2M'])
    #: where the experiments are: <experiments>/<case>/ holds fort.4 and the initial files
    experiments = variable(str, value='${IOSTACK_OIFS_EXPERIMENTS:-}')
    #: how the model is started, after the MPI launcher ({expid}: the experiment id)
    model_command = variable(str, value='"$OIFS_EXEC" -v ecmwf -e {expid}')

    @run_after('init')
    def set_layout_and_tags(self):
        case = openifs.CASES[self.case]
        self.num_tasks = case.mpi_tasks
        self.num_cpus_per_task = case.threads
        # two runs, with room over the seed's baseline wall time
        self.time_limit = f'{4 * case.baseline_minutes + 20}m'
        self.tags = {'openifs', 'fdb', 'bit-identity', 'performance', 'weekly'}
        if (self.case, self.nwrtout, self.stripe, self.hugepages) == ('T159', '1', 'inherit',
                                                                      'none'):
            # Table 2's baseline configuration
            self.tags.add('nightly')
        if self.hugepages != 'none':
            self.modules = [f'craype-hugepages{self.hugepages}']

    @run_after('setup')
    def set_tasks_per_node(self):
        cpus = self.current_partition.processor.num_cpus
        if cpus:
            self.num_tasks_per_node = max(1, cpus // self.num_cpus_per_task)

    @property
    def writer_stride(self):
        if self.nwrtout == 'node':
            return self.num_tasks_per_node or 1
        return int(self.nwrtout)

    def _setup_run(self, run, out):
        fdb = run == 'fdb'
        sets = [f'NAMCT0:LFDBOP={"true" if fdb else "false"}', f'NAMPAR0:NPROC={self.num_tasks}',
                f'NAMPAR1:NWRTOUT={self.writer_stride}']
        lines = [
            f'mkdir -p {out}/{run}',
            # initial files linked, the namelist copied: the runs edit it
            f'ln -sf "$EXPDIR"/* {out}/{run}/',
            f'rm -f {out}/{run}/fort.4 && cp "$EXPDIR/fort.4" {out}/{run}/fort.4',
            'python3 -m iostack_rfm.jobs.openifs namelist '
            f'{out}/{run}/fort.4 ' + ' '.join(f'--set {s}' for s in sets),
        ]
        if fdb:
            lines.append(f'python3 -m iostack.deployment.fdbconfig --root {out}/fdb/fdb-root '
                         f'--out {out}/fdb/fdb-config.yaml')
        return ' && '.join(lines)

    def _stripe(self, out):
        options = openifs.stripe_options(self.stripe)
        if options is None:
            return 'echo "iostack-note: striping inherited from the I/O directory"'
        lfs = ' '.join(options)
        return (f'if command -v lfs > /dev/null; then lfs setstripe {lfs} {out}/grib && '
                f'lfs setstripe {lfs} {out}/fdb && lfs getstripe -d {out}/fdb; '
                f'else echo "iostack-note: no lfs here, stripe {self.stripe} not applied"; fi')

    @run_before('run')
    def set_job(self):
        out = self.io_dir()
        model = self.model_command.format(expid='$EXPID')
        self.env_vars['OMP_NUM_THREADS'] = str(self.num_cpus_per_task)
        self.prerun_cmds = [
            f'EXPDIR={self.experiments}/{self.case}',
            self.step('inputs', 'test -f "$EXPDIR/fort.4" || { echo "iostack: no OpenIFS '
                      'experiment at $EXPDIR (fort.4): set IOSTACK_OIFS_EXPERIMENTS or the '
                      'variable experiments" >&2; false; } && '
                      'EXPID=$(cd "$EXPDIR" && ls ICMSH*INIT | sed -n "s/^ICMSH\\(....\\)INIT$/\\1/p")'
                      ' && test -n "$EXPID" && echo "experiment=$EXPID case=' + self.case + '"'),
            self.step('prepare', f'rm -rf {out}/grib {out}/fdb && mkdir -p {out}/grib {out}/fdb'
                      f' && {{ {self._stripe(out)}; }}'),
        ]
        for run in RUNS:
            config = f'FDB5_CONFIG_FILE={out}/fdb/fdb-config.yaml ' if run == 'fdb' else ''
            self.prerun_cmds += [
                self.step(f'setup-{run}', self._setup_run(run, out)),
                self.step(f'model-{run}', f'(cd {out}/{run} && {config}{self.mpi_command()} '
                          f'{model} > ifs.out 2>&1)'),
                self.step(f'logs-{run}', f'cp {out}/{run}/ifs.stat {run}.ifs.stat && '
                          f'cp {out}/{run}/NODE.001_01 {run}.NODE.001_01'),
            ]
        self.prerun_cmds.append(self.step(
            'compare', f'FDB5_CONFIG_FILE={out}/fdb/fdb-config.yaml python3 -m '
            f'iostack_rfm.jobs.openifs compare-fdb {out}/grib --fdb-root {out}/fdb/fdb-root '
            '> compare.out'))
        self.executable = 'rm'
        self.executable_opts = ['-rf', f'{out}/grib', f'{out}/fdb']

    def _compared(self, key):
        return sn.extractsingle(rf'^oifs-output: files=.*\b{key}=(\d+)', 'compare.out', 1, int)

    @sanity_function
    def validate(self):
        return sn.all([
            self.steps_ok(['inputs', 'prepare', 'setup-grib', 'model-grib', 'logs-grib',
                           'setup-fdb', 'model-fdb', 'logs-fdb', 'compare']),
            sn.assert_found(r'^oifs-output: files=.* RESULT=IDENTICAL$', 'compare.out'),
            # every message of every file, and FDB holds nothing else
            sn.assert_gt(self._compared('messages'), 0),
            sn.assert_eq(self._compared('identical'), self._compared('messages')),
            sn.assert_eq(self._compared('fdb_fields'), self._compared('messages')),
            sn.assert_eq(self._compared('bytes_fdb'), self._compared('bytes_grib')),
            # a grid-point and a spectral file per output step
            sn.assert_eq(self._compared('files'), 2 * self._compared('steps')),
            # both runs forecast as far
            sn.assert_eq(self._logs(openifs.forecast_seconds_of_run, 'fdb'),
                         self._logs(openifs.forecast_seconds_of_run, 'grib')),
        ])

    def _logs(self, reader, run):
        return parsed(reader, f'{run}.ifs.stat', f'{run}.NODE.001_01')

    @run_after('init')
    def set_perf_variables(self):
        for run in RUNS:
            self.perf_variables[f'forecast_days_per_day_{run}'] = sn.make_performance_function(
                self._logs(openifs.forecast_days_per_day_of_run, run), 'days/day')
        self.perf_variables['messages_compared'] = sn.make_performance_function(
            self._compared('messages'), 'messages')


def _deployment_root() -> pathlib.Path:
    """The deployment whose release is under test (bin/iostack says: IOSTACK_ROOT), else
    local's default root."""
    return context.root() or context.settings().deploy_root('local')


def _installed_ifs_test(site: str) -> str:
    """ifs-test as OpenIFS's recipe installs it, in the deployment's install tree
    (spack-env/common/config.yaml: <root>/opt/<name>-<version>-<hash:7>); '' if the
    site's lock has no OpenIFS."""
    for spec in stack.roots_of(SpackEnv(site), context.release_lock()):
        if spec.name == 'openifs' and not spec.is_external:
            return str(_deployment_root() / 'opt' / f'openifs-{spec.version}-{spec.hash[:7]}'
                       / 'share' / 'openifs' / 'ifs-test')
    return ''


#: ifs-test's storage.yaml entries the t21 forecast tests read (by extract_path)
T21_DATA = ('ifsdata', 't21/inidata')
#: MPI tasks and threads of each test (its `params`: NPROC, NTHREAD)
T21_LAYOUT = {'test_fc': (1, 1), 'test_np2': (2, 1), 'test_nt2': (1, 2)}


@rfm.simple_test
class OpenifsCheck(AppCheck):
    descr = ('OpenIFS ifs-test t21 with and without FDB: norms bit-identical across releases, '
             'FDB fields = GRIB files, forecast days/day (seed 000)')
    valid_systems = ['+mpi']
    app_features = ['openifs']
    case = parameter(list(T21_LAYOUT))
    #: the `type: file` data source: storage.yaml's source_path of each file under it
    test_data = variable(str, value=os.environ.get('IOSTACK_OIFS_TEST_DATA', ''))
    #: the installed ifs-test (default: OpenIFS's, from the deployment's lock)
    ifs_test = variable(str, value='')
    #: where each test's saved norms outlive releases
    norms_dir = variable(str, value='')
    #: ifs-run's launcher and its option for the number of tasks (bin/set_launcher.bash)
    launcher = variable(str, value='mpirun')
    launcher_nproc_flag = variable(str, value='-np')
    tags = {'openifs', 'fdb', 'bit-identity', 'performance', 'nightly'}
    keep_files = ['compare.out', 'grib.ifs-run.log', 'fdb.ifs-run.log']

    @run_after('init')
    def set_layout(self):
        self.num_tasks, self.num_cpus_per_task = T21_LAYOUT[self.case]
        self.time_limit = '60m'

    def _entries(self):
        """storage.yaml's entries of T21_DATA: [(source_path, target_path, extract_path)]."""
        import yaml

        with open(os.path.join(self.ifs_test, 'storage.yaml')) as f:
            files = yaml.safe_load(f)['external_data']['files']
        return [(e['source_path'], e['target_path'], e['extract_path'])
                for e in files if e.get('extract_path') in T21_DATA]

    @run_after('setup')
    def find_the_data(self):
        root = _deployment_root()
        self.ifs_test = self.ifs_test or _installed_ifs_test(
            context.site_of(self.current_partition))
        self.test_data = self.test_data or str(root / 'var' / 'ifs-test-data')
        self.norms_dir = self.norms_dir or str(root / 'var' / 'openifs-norms')
        self.data_entries = []
        if not os.path.isfile(os.path.join(self.ifs_test, 'storage.yaml')):
            if self.is_dry_run():
                return      # a dry run writes the job script, with no data to stage
            self.skip(f'no ifs-test at {self.ifs_test or "(the lock has no OpenIFS)"}: '
                      'OpenIFS installs it in share/openifs/ifs-test')
        self.data_entries = self._entries()
        missing = [src for src, _, _ in self.data_entries
                   if not os.path.isfile(os.path.join(self.test_data, src))]
        if (missing or len(self.data_entries) != len(T21_DATA)) and not self.is_dry_run():
            self.skip(f'no OpenIFS test data in {self.test_data}: it needs ifs-test '
                      f"storage.yaml's {', '.join(missing)} there (a `type: file` data "
                      'source; IOSTACK_OIFS_TEST_DATA names the directory)')

    def _run(self, run, out):
        """ifs-run of the test in its own directory: writing GRIB files, or FDB."""
        case_dir = f'{out}/{run}/t21/{self.case}'
        fdb = run == 'fdb'
        lines = [
            f'python3 -m iostack_rfm.jobs.ifstest case --ifs-test {self.ifs_test} '
            f'--case t21/{self.case} --cache {out}/cache --out {out}/{run} '
            '--executable "$OIFS_EXEC" --cycle "$OIFS_CYCLE" '
            '--eccodes-share "$(dirname "$(codes_info -d)")"',
        ]
        if fdb:
            # FDB output must not change the model: checked against the GRIB run's norms
            lines += [f'cp {out}/grib/t21/{self.case}/SAVED_NORMS {case_dir}/', 'MODE=check']
        else:
            lines.append(f'if [ -s "$NORMS/SAVED_NORMS" ]; then cp "$NORMS/SAVED_NORMS" '
                         f'{case_dir}/ && MODE=check; else MODE=init; fi')
        lines += [
            f'echo "bitid run={run} mode=$MODE"',
            f'(cd {case_dir} && LFDBOP={".TRUE." if fdb else ".FALSE."} '
            f'IFS_TEST_BITIDENTICAL=$MODE ./ifs-run --launcher="{self.launcher}" '
            f'--launcher_nproc_flag="{self.launcher_nproc_flag}" > ifs-run.log 2>&1)',
        ]
        return ' && '.join(lines)

    @run_before('run')
    def set_job(self):
        out = self.io_dir()
        entries = ' '.join(f'--entry {s} {t} {e}' for s, t, e in self.data_entries)
        self.env_vars.update({
            'FDB5_CONFIG_FILE': f'{out}/fdb-config.yaml',
            'MULTIO_CONFIG_FILE': f'{out}/multio-sinks.yaml',
        })
        self.prerun_cmds = [
            f'NORMS={self.norms_dir}/$(basename "$OIFS_EXEC")/{self.case}',
            self.step('stage', f'rm -rf {out}/grib {out}/fdb {out}/fdb-root && '
                      f'python3 -m iostack_rfm.jobs.ifstest stage --root {self.test_data} '
                      f'--cache {out}/cache {entries} && '
                      f'python3 -m iostack.deployment.fdbconfig --root {out}/fdb-root --out '
                      f'{out}/fdb-config.yaml && '
                      f'python3 -m iostack_rfm.jobs.multio sinks {out}/multio-sinks.yaml'),
        ]
        for run in ('grib', 'fdb'):
            case_dir = f'{out}/{run}/t21/{self.case}'
            self.prerun_cmds += [
                self.step(f'model-{run}', self._run(run, out)),
                self.step(f'logs-{run}', f'cp {case_dir}/ifs-run.log {run}.ifs-run.log && '
                          f'cp {case_dir}/ifs.stat {run}.ifs.stat && '
                          f'cp {case_dir}/NODE.001_01 {run}.NODE.001_01'),
            ]
        self.prerun_cmds += [
            # a first run on this deployment keeps its norms for the releases after it
            self.step('keep-norms', f'if [ ! -s "$NORMS/SAVED_NORMS" ]; then mkdir -p "$NORMS" '
                      f'&& cp {out}/grib/t21/{self.case}/SAVED_NORMS "$NORMS/"; fi'),
            self.step('compare', f'python3 -m iostack_rfm.jobs.openifs compare-fdb '
                      f'{out}/grib/t21/{self.case} --fdb-root {out}/fdb-root > compare.out'),
        ]
        self.executable = 'rm'
        self.executable_opts = ['-rf', f'{out}/grib', f'{out}/fdb', f'{out}/fdb-root']

    def _compared(self, key):
        return sn.extractsingle(rf'^oifs-output: files=.*\b{key}=(\d+)', 'compare.out', 1, int)

    def _logs(self, reader, run):
        return parsed(reader, f'{run}.ifs.stat', f'{run}.NODE.001_01')

    @sanity_function
    def validate(self):
        return sn.all([
            self.steps_ok(['stage', 'model-grib', 'logs-grib', 'model-fdb', 'logs-fdb',
                           'keep-norms', 'compare']),
            # ifs-check-bitid: norms saved by the first run, equal in every later one
            sn.assert_found(r'^bitid run=grib mode=(init|check)$', self.stdout),
            sn.assert_found(r'Norms generated and saved as SAVED_NORMS|Bit-identical test '
                            r'PASSED', 'grib.ifs-run.log'),
            sn.assert_found(r'Bit-identical test PASSED', 'fdb.ifs-run.log'),
            sn.assert_found(r'^oifs-output: files=.* RESULT=IDENTICAL$', 'compare.out'),
            sn.assert_gt(self._compared('messages'), 0),
            sn.assert_eq(self._compared('identical'), self._compared('messages')),
            sn.assert_eq(self._compared('fdb_fields'), self._compared('messages')),
            sn.assert_eq(self._compared('bytes_fdb'), self._compared('bytes_grib')),
            sn.assert_eq(self._logs(openifs.forecast_seconds_of_run, 'fdb'),
                         self._logs(openifs.forecast_seconds_of_run, 'grib')),
        ])

    @run_after('init')
    def set_perf_variables(self):
        for run in ('grib', 'fdb'):
            self.perf_variables[f'forecast_days_per_day_{run}'] = sn.make_performance_function(
                self._logs(openifs.forecast_days_per_day_of_run, run), 'days/day')
        self.perf_variables['messages_compared'] = sn.make_performance_function(
            self._compared('messages'), 'messages')


# the tests ifstest can lay out are the ones this check runs
assert set(T21_LAYOUT) == set(ifstest.FORECAST_CASES)
