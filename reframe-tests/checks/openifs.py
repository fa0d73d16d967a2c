"""OpenIFS with FDB against OpenIFS without ([OIFS-HECToR], sections 3 to 5).

One job runs the same experiment twice on the same nodes: first writing GRIB files (namelist
&NAMCT0 LFDBOP=false, the default: ICMGG<exp>+<step> and ICMSH<exp>+<step> per output step),
then into FDB (LFDBOP=true). Every output file's fields are then retrieved from FDB and
compared message by message (counts, bytes, sha256, grib_compare); FDB must hold exactly
those fields and bytes (iostack_rfm.openifs compare-fdb). The speed of each run is
[OIFS-HECToR]'s metric, forecast days per wall-clock day (iostack_rfm/openifs.py: forecast
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
"""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable

from iostack_rfm import openifs
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
            'python3 -m iostack_rfm.openifs namelist '
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
            f'iostack_rfm.openifs compare-fdb {out}/grib --fdb-root {out}/fdb/fdb-root '
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
