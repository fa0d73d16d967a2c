"""OpenIFS forecasts from analytic initial states: no ECMWF data (issue 32).

OpenIFS 48r1.1.0's ifsMASTER, as the deployed release's `openifs-env` module gives it
(OIFS_EXEC), runs academic test cases whose initial state it builds itself (N3DINI=2, the
geometry from the namelist: NSUPERSEDE=0): Held-Suarez at T21L19 (the smoke case) and
TL159L31, and the DCMIP 2016 dry baroclinic wave (case 161) at TL159L31, each a forecast
day with hourly output on model and pressure levels. The namelists are the project's
(reframe-tests/src/openifs_idealised, a comment per group); the job adds the output mode
and ifs-test's empty groups (iostack_rfm.jobs.openifs_idealised).

Parameters: the case, and the output mode the case measures:
- none: no output at all (NAMCT1 N1HIS=0, N1POS=0): the model's own speed;
- grib: GRIB files;
- fdb: FDB through MultIO's FDB sink (LFDBOP). Its job runs the no-output and GRIB runs as
  well, interleaved with its own (the order turns each repeat), so that FDB's share of the
  forecast's time comes from runs paired on one node, and the fields FDB holds are compared
  with the GRIB files of the same repeat (iostack_rfm.jobs.openifs compare-fdb: counts,
  bytes, sha256, grib_compare).
Each mode runs `repeats` times (default 3); the figures are medians with their spread.

Sanity: every run ended normally (` *** END CNT0 *** ` in NODE.001_01, exit 0) and reached
the forecast's end; it wrote its spectral norms every step (ifs-test's ifs-grep-norms.pl),
identical in every rerun of a mode; the output runs wrote identical files; FDB holds
exactly the GRIB files' fields. Between modes the norms are compared and said, not
required: with the stack's OpenBLAS a post-processing step changes the model's norms from
the next step (its SGEMM rounds a field differently with the number of fields the Legendre
transforms take at once), and so does the layout. `reference_blas` (a reference BLAS
library, netlib's: Debian's libblas3) is preloaded into every run where set: then every
mode must print the same norms, and the norms kept for the releases after it hold every
layout too (iostack_rfm.jobs.openifs_idealised.norms_key). Norms across releases: the first
run of a case, layout and mode on a deployment saves its norms under <deployment
root>/var/openifs-norms/<executable>/<norms_key>, which outlives releases; every later run
must print the same, else the step and field that first differ are named.

Performance: days_per_day (forecast days per wall-clock day of the mode's runs, the model's
launch to its exit) and its spread; the fdb case also gives fdb_share and grib_share (the
time beyond the no-output runs', over the output run's: seed 000's FDB cost, goal 1 %).
Recorded baselines go to references/openifs_idealised.yaml (`bin/iostack record-baseline`).

Layout: `tasks` MPI ranks (0: one per core of the partition's processor, over `threads`, at
most the case's max_tasks) of `threads` OpenMP threads each. `sets` adds namelist switches (GROUP:KEY=VALUE), e.g.
NAMDIM:NPROMA=-32 for a tuning sweep.
"""
import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable

from iostack_rfm import context
from iostack_rfm.base import AppCheck
from iostack_rfm.jobs import openifs_idealised as idealised

#: the runs a variant's job makes, in the order of its first repeat
RUNS_OF = {'none': ('none',), 'grib': ('grib',), 'fdb': ('none', 'grib', 'fdb')}
#: ifs-test's files the job uses, under OIFS_HOME (the openifs recipe installs ifs-test)
EMPTY_GROUPS = '$OIFS_HOME/ifs-test/share/ifs_test/namelist'
GREP_NORMS = '$OIFS_HOME/ifs-test/bin/ifs-grep-norms.pl'
#: The stack's FDB (5.13) has no configuration directory of its own, so it reads the node's
#: /etc/fdb/dbnames (Debian's FDB 5.10's), which names a database
#: {class}:{expver}/{date}:{time}:{domain}/{stream}; 5.13's fdb-list then finds none of the
#: fields it wrote there (0 of 4375 in a T21 run; Debian's 5.10 lists them all). The runs
#: and the comparison name databases as FDB does by default, one directory per database.
FDB_NAMES = 'FDB_DBNAMES_FILE=/dev/null'


@rfm.simple_test
class OpenifsIdealisedCheck(AppCheck):
    descr = ('OpenIFS idealised forecasts (Held-Suarez, DCMIP16 161) from analytic states: '
             'days/day with no output, GRIB files and FDB; FDB = GRIB; norms identical')
    valid_systems = ['+mpi']
    app_features = ['openifs']
    case = parameter(list(idealised.CASES))
    output = parameter(list(RUNS_OF))
    #: runs of each mode (medians and spread)
    repeats = variable(int, value=3)
    #: MPI ranks (0: one per core, over `threads`) and OpenMP threads of each
    tasks = variable(int, value=0)
    threads = variable(int, value=1)
    #: further namelist switches, GROUP:KEY=VALUE
    sets = variable(typ.List[str], value=[])
    #: where norms outlive releases (default <deployment root>/var/openifs-norms)
    norms_dir = variable(str, value='')
    #: a reference BLAS library preloaded into every run (e.g. Debian's
    #: /usr/lib/x86_64-linux-gnu/blas/libblas.so.3): modes and layouts must agree
    reference_blas = variable(str, value='')
    keep_files = ['runs.txt', 'figures.out', 'compare.out', 'norms.out', 'NODE.001_01',
                  'ifs.stat']

    @run_after('init')
    def set_tags_and_time(self):
        self.tags = {'openifs', 'idealised', 'bit-identity', 'performance', 'nightly'}
        if self.output == 'fdb':
            self.tags.add('fdb')
        smoke = idealised.CASES[self.case].smoke
        self.num_cpus_per_task = self.threads
        # a TL159 forecast day is minutes on a 2-core node: room for every run of the job
        per_run = 2 if smoke else 15
        self.time_limit = f'{per_run * self.repeats * len(RUNS_OF[self.output]) + 10}m'

    @run_after('init')
    def key_the_configuration(self):
        """A run set up otherwise than by default (a layout, the reference BLAS, namelist
        switches) is another figure: its values are filed, and judged, under their own
        variant, never against the default's."""
        extra = [f'tasks={self.tasks}'] if self.tasks else []
        extra += [f'threads={self.threads}'] if self.threads != 1 else []
        extra += ['blas=reference'] if self.reference_blas else []
        extra += [f'set.{s.replace(":", ".")}' for s in self.sets]
        if extra:
            self.reference_variant = ','.join([self.reference_variant, *extra])

    @run_after('setup')
    def set_layout(self):
        cpus = self.current_partition.processor.num_cpus or 1
        most = idealised.CASES[self.case].max_tasks or cpus
        self.num_tasks = self.tasks or max(1, min(most, cpus // self.threads))
        self.num_tasks_per_node = self.num_tasks
        if not self.norms_dir:
            root = context.root() or context.settings().deploy_root(
                context.site_of(self.current_partition))
            self.norms_dir = str(root / 'var' / 'openifs-norms')

    def _order(self, rep):
        """The runs of repeat `rep` (1-based): each repeat starts one mode later, so no
        mode always runs first (a cold page cache) or last."""
        runs = RUNS_OF[self.output]
        k = (rep - 1) % len(runs)
        return runs[k:] + runs[:k]

    def _run_dir(self, mode, rep):
        return f'{self.io_dir()}/runs/{mode}-{rep}'

    def _run(self, mode, rep):
        """One forecast: its namelist, the model timed by the job's clock, its record and
        norms."""
        run = self._run_dir(mode, rep)
        out = self.io_dir()
        sets = ' '.join(f'--set {s}' for s in self.sets)
        env = ''
        setup = [f'rm -rf {run} && mkdir -p {run}',
                 f'python3 -m iostack_rfm.jobs.openifs_idealised fort4 {self.case} {mode} '
                 f'--nproc {self.num_tasks} --groups {EMPTY_GROUPS} --out {run}/fort.4 {sets}']
        if mode == 'fdb':
            # each FDB run its own database: the comparison reads one run's fields
            setup.append(f'rm -rf {out}/fdb-{rep} && python3 -m iostack.deployment.fdbconfig '
                         f'--root {out}/fdb-{rep}/root --out {out}/fdb-{rep}/config.yaml')
            env = (f'{FDB_NAMES} FDB5_CONFIG_FILE={out}/fdb-{rep}/config.yaml '
                   f'MULTIO_CONFIG_FILE={out}/multio-sinks.yaml ')
        if self.reference_blas:
            env = f'LD_PRELOAD={self.reference_blas} {env}'
        model = (f'cd {run} && t0=$EPOCHREALTIME && {env}{self.mpi_command()} "$OIFS_EXEC" '
                 f'> ifs.out 2>&1; rc=$?; t1=$EPOCHREALTIME; '
                 f'python3 -m iostack_rfm.jobs.openifs_idealised record {run} --mode {mode} '
                 f'--rep {rep} --start $t0 --end $t1 --runs {self.stagedir}/runs.txt; '
                 f'rec=$?; perl {GREP_NORMS} NODE.001_01 > NORMS; '
                 f'[ $rc = 0 ] || {{ echo "model exited with $rc"; tail -n 30 ifs.out; }}; '
                 f'[ $rc = 0 ] && [ $rec = 0 ]')
        return [self.step(f'setup-{mode}-{rep}', ' && '.join(setup)),
                self.step(f'model-{mode}-{rep}', f'({model})')]

    def _step_names(self):
        names = ['prepare']
        for rep in range(1, self.repeats + 1):
            for mode in self._order(rep):
                names += [f'setup-{mode}-{rep}', f'model-{mode}-{rep}']
        names += ['figures', 'norms']
        if self.output == 'fdb':
            names.append('compare')
        return names

    @run_before('run')
    def set_job(self):
        out = self.io_dir()
        self.env_vars.update({
            'OMP_NUM_THREADS': str(self.threads),
            # ifs-test's t21 settings: the model's OpenMP regions need more than the default stack
            'OMP_STACKSIZE': '64M',
            # the stack's OpenBLAS is built with pthreads: left to itself it starts a thread
            # per core inside each of the model's OpenMP threads, and with 2 threads a rank
            # its split changed the norms from step 1 (1x2 against 1x1; with this, from step
            # 3). Ranks of one thread print the same norms either way.
            'OPENBLAS_NUM_THREADS': '1',
        })
        self.prerun_cmds = [
            # ecCodes' IFS samples, as ifs-test's ifs_env sets them for ifsMASTER's encoding
            'export GRIB_SAMPLES_PATH="$(dirname "$(codes_info -d)")/ifs_samples/grib1_mlgrib2"',
            self.step('prepare', f'test -f {EMPTY_GROUPS} && test -x "$OIFS_EXEC" && '
                      + (f'test -f {self.reference_blas} && ' if self.reference_blas else '')
                      + f'rm -rf {out}/runs {out}/fdb-* runs.txt && mkdir -p {out}/runs && '
                      f'python3 -m iostack_rfm.jobs.multio sinks {out}/multio-sinks.yaml'),
        ]
        for rep in range(1, self.repeats + 1):
            for mode in self._order(rep):
                self.prerun_cmds += self._run(mode, rep)
        dirs = [self._run_dir(m, r) for r in range(1, self.repeats + 1) for m in self._order(r)]
        written = [d for d in dirs if not d.split('/')[-1].startswith('none-')]
        first = dirs[0]
        # this variant's own mode: what the releases after it are held to
        mine = self._run_dir(self.output, 1)
        # outputs must be identical between runs of a mode with output: GRIB files of GRIB
        # runs (FDB runs write none; their fields are compared below)
        grib = [d for d in written if d.split('/')[-1].startswith('grib-')]
        same = f'--same-output {" ".join(grib)}' if grib else ''
        across = '--same-across-modes' if self.reference_blas else ''
        key = idealised.norms_key(self.case, self.num_tasks, self.threads, self.output,
                                  bool(self.reference_blas))
        self.prerun_cmds += [
            self.step('figures', f'python3 -m iostack_rfm.jobs.openifs_idealised figures '
                      f'runs.txt --by-mode --norms-of {" ".join(dirs)} {same} {across} '
                      f'> figures.out; '
                      f'rc=$?; '
                      f'cp {first}/NODE.001_01 {first}/ifs.stat . ; (exit $rc)'),
            # the first run under its norms key (case, layout and mode; with the reference
            # BLAS, the case) keeps its norms for the releases after it; every later one
            # must print the same
            self.step('norms', f'NORMS={self.norms_dir}/$(basename "$OIFS_EXEC")/{key}; '
                      f'if [ -s "$NORMS/NORMS" ]; then python3 -m iostack_rfm.jobs.'
                      f'openifs_idealised figures runs.txt --norms-of "$NORMS" {mine} '
                      f'| grep "^oifs-idealised: norms" | sed "s/norms/release-norms/" '
                      f'> norms.out; else mkdir -p "$NORMS" && cp {mine}/NORMS "$NORMS/" && '
                      f'echo "oifs-idealised: release-norms saved in $NORMS" > norms.out; fi; '
                      f'grep -q "saved in\\|RESULT=IDENTICAL" norms.out'),
        ]
        if self.output == 'fdb':
            r = self.repeats
            self.prerun_cmds.append(self.step(
                'compare', f'{FDB_NAMES} FDB5_CONFIG_FILE={out}/fdb-{r}/config.yaml python3 -m '
                f'iostack_rfm.jobs.openifs compare-fdb {self._run_dir("grib", r)} '
                f'--fdb-root {out}/fdb-{r}/root > compare.out'))
        self.executable = 'rm'
        self.executable_opts = ['-rf', f'{out}/runs', *[f'{out}/fdb-{r}' for r in
                                                        range(1, self.repeats + 1)]]

    # sanity

    def _figure(self, key, mode=None):
        where = rf'mode={mode} .*\b' if mode else r'.*\b'
        return sn.extractsingle(rf'^oifs-idealised: {where}{key}=([\d.]+)', 'figures.out', 1,
                                float)

    def _compared(self, key):
        return sn.extractsingle(rf'^oifs-output: files=.*\b{key}=(\d+)', 'compare.out', 1, int)

    @sanity_function
    def validate(self):
        runs = self.repeats * len(RUNS_OF[self.output])
        checks = [
            self.steps_ok(self._step_names()),
            # every run ended normally, a forecast day, its norms printed each step
            sn.assert_eq(sn.count(sn.extractall(r'^oifs-run: .* end=yes ', 'runs.txt')), runs),
            sn.assert_eq(sn.count(sn.extractall(r'^oifs-run: .* forecast_hours=24 ',
                                                'runs.txt')), runs),
            sn.all(sn.map(lambda m: sn.assert_eq(int(m[1]), int(m[0]) + 1),
                          sn.extractall(r'^oifs-run: .* steps=(\d+) norms=(\d+) ', 'runs.txt',
                                        (1, 2)))),
            # reruns of each mode print the same norms (between modes: said in figures.out)
            sn.assert_eq(sn.count(sn.extractall(
                r'^oifs-idealised: norms mode=\w+ runs=\d+ RESULT=IDENTICAL$', 'figures.out')),
                len(RUNS_OF[self.output])),
            sn.assert_found(r'^oifs-idealised: release-norms (saved in|.*RESULT=IDENTICAL$)',
                            'norms.out'),
        ]
        if self.reference_blas and len(RUNS_OF[self.output]) > 1:
            checks.append(sn.assert_found(r'^oifs-idealised: norms across-modes .* '
                                          r'RESULT=IDENTICAL$', 'figures.out'))
        if self.output != 'none':
            checks.append(sn.assert_found(r'^oifs-idealised: output runs=\d+ files=[1-9]\d* '
                                          r'RESULT=IDENTICAL$', 'figures.out'))
        if self.output == 'fdb':
            checks += [
                sn.assert_found(r'^oifs-output: files=.* RESULT=IDENTICAL$', 'compare.out'),
                sn.assert_gt(self._compared('messages'), 0),
                sn.assert_eq(self._compared('identical'), self._compared('messages')),
                sn.assert_eq(self._compared('fdb_fields'), self._compared('messages')),
                sn.assert_eq(self._compared('bytes_fdb'), self._compared('bytes_grib')),
            ]
        return sn.all(checks)

    @run_after('init')
    def set_perf_variables(self):
        self.perf_variables['days_per_day'] = sn.make_performance_function(
            self._figure('days_per_day', self.output), 'days/day')
        self.perf_variables['days_per_day_spread'] = sn.make_performance_function(
            self._figure('days_per_day_spread', self.output), '')
        if self.output == 'fdb':
            for mode in ('none', 'grib'):
                self.perf_variables[f'days_per_day_{mode}'] = sn.make_performance_function(
                    self._figure('days_per_day', mode), 'days/day')
            for mode in ('fdb', 'grib'):
                self.perf_variables[f'{mode}_share'] = sn.make_performance_function(
                    sn.extractsingle(rf'^oifs-idealised: share .*\b{mode}=(-?[\d.]+)',
                                     'figures.out', 1, float), '')
            self.perf_variables['messages_compared'] = sn.make_performance_function(
                self._compared('messages'), 'messages')
