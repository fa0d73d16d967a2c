"""The I/O profile of the programs the nightly times, by Darshan, once per night.

Each case runs one of the stack's I/O programs on a small workload `repeats` times plain
and `repeats` times under the release's darshan-runtime, interleaved (plain, profiled, plain,
...), at the same durability. A profiled run preloads libdarshan.so into each rank through `env`
(the launcher itself is never profiled) and writes one log;
darshan-util's `darshan-parser --total --file` reads it. The case reports, per module
(POSIX, MPI-IO, STDIO): bytes, operations, syncs, time in I/O, files touched and written,
POSIX writes by size (Darshan's buckets), and Darshan's overhead, the ratio of the medians
of its profiled and plain runs minus one.

Sanity holds the profile to the truth it must show: IOR's POSIX bytes are exactly its
ranks x block; FDB's, MultIO's (multio-hammer into FDB) and NetCDF's are at least the data
they were given; OpenIFS's STDIO bytes at least its GRIB files' (Held-Suarez T21, where the
release has OpenIFS: the IFS's CIO writes them with fwrite); and Darshan's operation counts
are the same in every profiled run (they count a deterministic program's calls: a count
that moves between runs would be no use as a gate). Those operation counts (writes, reads,
opens, syncs; darshan.GATED) are then held exactly to the ones recorded for the build
(references/counts/darshan-<site>.yaml, keyed by the program's and darshan-runtime's
hashes): an extra write or sync is a regression, named with both counts; a build with none
recorded fails with the command that records them (`-S DarshanProfileCheck.record_counts=yes`).
Bytes are shown, not held: a log with times in it writes a few bytes more or fewer.
"""
import json
import pathlib

import reframe as rfm
import reframe.utility.sanity as sn
import yaml
from reframe.core.exceptions import SanityError
from reframe.core.builtins import (parameter, performance_function, run_after, run_before,
                                   sanity_function, variable)

from iostack_rfm import context
from iostack_rfm.base import IostackMixin, median, parsed
from iostack_rfm.parsers import darshan, netcdf

MIB = 1 << 20
# netcdf-output-bench's smallest workload (checks/netcdf_output.py 'small')
NETCDF_MODEL, NETCDF_DAYS = 'inmcm6p', 1
#: where what a program reads depends on the node, not on the program
NODE_DIRS = '/proc,/sys,/dev'
# Each rank runs the program with libdarshan.so preloaded (`env`, so the launcher itself is
# not profiled); DARSHAN_LOGFILE names the one log (rank 0 writes it at MPI_Finalize; a
# serial program at exit). Darshan leaves out /var/, /usr/, /etc/ ... by default: a stage
# under /var/tmp would show no I/O at all. It leaves out /proc, /sys and /dev only: what MPI's
# hwloc reads there depends on the node's CPUs, and the counts must not.
# A preload the job already has stays, after Darshan's (a tool's, or a test's injection).
PRELOAD = ('env LD_PRELOAD=$DARSHAN_RUNTIME_ROOT/lib/libdarshan.so${LD_PRELOAD:+:$LD_PRELOAD} '
           f'DARSHAN_EXCLUDE_DIRS={NODE_DIRS}')
# fdb-archive-bench's fields: steps x members x params, of a T159 template (as the
# throughput check's smallest)
FDB_FIELDS, FDB_GRID = (2, 2, 2), (101, 200)
# multio-hammer's fields: steps x surface parameters of the same template
MULTIO_STEPS, MULTIO_PARAMS = 2, 4
# OpenIFS's smoke case (checks/openifs_idealised.py): seconds, 25 hourly GRIB files
OIFS_CASE = 'hs_t21l19'
#: the package whose build (with its dependencies) decides a program's operation counts
PACKAGE = {'ior': 'ior', 'fdb-archive': 'fdb-archive-bench', 'multio': 'multio',
           'netcdf-c': 'netcdf-output-bench', 'pnetcdf': 'netcdf-output-bench',
           'openifs': 'openifs'}
#: Darshan's operation counts per program of each site's build (darshan.GATED)
COUNT_REFERENCES = pathlib.Path(__file__).resolve().parents[1] / 'references' / 'counts'


def build_of(lock: pathlib.Path | None, program: str) -> str | None:
    """`<package>/<hash7> darshan-runtime/<hash7>` of the release's lock: what a program's
    counts were recorded for; None without a lock or the package."""
    if lock is None:
        return None
    specs = json.loads(lock.read_text())['concrete_specs']
    found = {s['name']: h[:7] for h, s in specs.items()}
    names = (PACKAGE[program], 'darshan-runtime')
    if not all(n in found for n in names):
        return None
    return ' '.join(f'{n}/{found[n]}' for n in names)


@rfm.simple_test
class DarshanProfileCheck(IostackMixin, rfm.RunOnlyRegressionTest):
    descr = "Darshan's I/O profile of the stack's I/O programs, and its overhead"
    valid_systems = ['+fdb']
    valid_prog_environs = ['+darshan-runtime']
    app_features = ['darshan-runtime']
    program = parameter(['ior', 'fdb-archive', 'multio', 'netcdf-c', 'pnetcdf', 'openifs'])
    repeats = variable(int, value=3)
    num_tasks = 2
    # the job's own line runs on the batch host; MPI programs are its steps (mpi_command)
    steps_job = True
    #: IOR's block per rank
    ior_block_mib = variable(int, value=8)
    #: record this run's operation counts as the build's references instead of judging
    #: them (`-S DarshanProfileCheck.record_counts=yes`; then commit references/counts/)
    record_counts = variable(str, value='')
    tags = {'darshan', 'profile', 'nightly'}

    @run_after('init')
    def serial_programs(self):
        # fdb-archive-bench is one process, like an FDB writer of the throughput check
        if self.program in ('fdb-archive', 'multio'):
            self.num_tasks = 1
        # MultIO's load generator where the stack has MultIO
        if self.program == 'multio':
            self.require_app_features(['multio'])
        # OpenIFS where the release has it (local/nwp): its environments carry +openifs
        if self.program == 'openifs':
            self.require_app_features(['openifs'])

    def _command(self, out):
        if self.program == 'ior':
            return (f'{self.mpi_command()} {{wrap}} ior -a POSIX -w -r -e -F '
                    f'-b {self.ior_block_mib}m -t 1m -o {out}/testfile')
        if self.program == 'fdb-archive':
            steps, members, params = FDB_FIELDS
            return (f'{{wrap}} fdb-archive-bench --path key --template template.grib '
                    f'--nsteps {steps} --members {members} --nparams {params}')
        if self.program == 'multio':
            # multio-hammer (transport none: its plan's Sink archives into FDB in-process),
            # a flush per step, the FDB check's template as every field
            # from a directory of its own that Darshan leaves out: each plan appends its
            # timings to multio-<host>-<pid>.log there (MultIO 1.5.1 always does), whose
            # length varies, and Darshan's byte count would vary with it
            return (f'mkdir -p mlog && cd mlog && {{wrap}} DARSHAN_EXCLUDE_DIRS=$PWD,{NODE_DIRS} '
                    'multio-hammer '
                    f'--config=$OLDPWD/multio-hammer.yaml --nbsteps={MULTIO_STEPS} --nblevels=1 '
                    '--member=1 $OLDPWD/template.grib')
        if self.program == 'openifs':
            # Held-Suarez T21L19, a forecast day with hourly GRIB files, in its own directory
            return (f'cd {out} && cp $OLDPWD/fort.4 . && {self.mpi_command()} {{wrap}} '
                    '"$OIFS_EXEC"')
        library, mode = {'netcdf-c': ('netcdf', 'serial'), 'pnetcdf': ('pnetcdf', 'combined')}[
            self.program]
        return (f'{self.mpi_command()} {{wrap}} netcdf-output-bench --mode {mode} '
                f'--library {library} --model {NETCDF_MODEL} --days {NETCDF_DAYS} --batch 1 '
                f'--output-dir {out}')

    @run_before('run')
    def set_job(self):
        out = f'{self.io_dir()}/darshan-{self.program}'
        nonmpi = 'export DARSHAN_ENABLE_NONMPI=1; ' if self.num_tasks == 1 else ''
        self.prerun_cmds = []
        if self.program in ('fdb-archive', 'multio'):
            # an FDB of the job's own, and one ensemble-member field as the template
            self.env_vars['FDB5_CONFIG_FILE'] = '$PWD/fdb-config.yaml'
            self.prerun_cmds += [
                'python3 -m iostack.deployment.fdbconfig --root fdb-root --out fdb-config.yaml',
                f'python3 -m iostack_rfm.jobs.gribgen first.grib 1 1 {FDB_GRID[0]} '
                f'{FDB_GRID[1]} --count 1',
                'grib_set -s productDefinitionTemplateNumber=1,type=pf,stream=enfo,number=1,'
                'level=1 first.grib template.grib',
                'echo "template bytes=$(stat -c %s template.grib)"',
            ]
        if self.program == 'multio':
            self.prerun_cmds.append('python3 -m iostack_rfm.jobs.multio hammer-config '
                                    f'multio-hammer.yaml --params {MULTIO_PARAMS}')
        if self.program == 'openifs':
            # as OpenifsIdealisedCheck runs it (checks/openifs_idealised.py)
            self.env_vars.update({'OMP_NUM_THREADS': '1', 'OMP_STACKSIZE': '64M',
                                  'OPENBLAS_NUM_THREADS': '1'})
            self.prerun_cmds += [
                'export GRIB_SAMPLES_PATH="$(dirname "$(codes_info -d)")/ifs_samples/'
                'grib1_mlgrib2"',
                f'python3 -m iostack_rfm.jobs.openifs_idealised fort4 {OIFS_CASE} grib '
                f'--nproc {self.num_tasks} --groups '
                '$OIFS_HOME/ifs-test/share/ifs_test/namelist --out fort.4',
            ]
        for i in range(self.repeats):
            for kind, wrap, env in (('plain', '', ''), ('darshan', PRELOAD,
                                     f'{nonmpi}export DARSHAN_LOGFILE=$PWD/run-{i}.darshan; ')):
                command = self._command(out).format(wrap=wrap).strip()
                self.prerun_cmds += [
                    f'rm -rf {out} fdb-root && mkdir -p {out} fdb-root',
                    f'( {env}s=$(date +%s.%N); {command} > {kind}-{i}.out 2>&1; rc=$?; '
                    f'e=$(date +%s.%N); echo "run={kind} i={i} rc=$rc '
                    f'seconds=$(echo "$e - $s" | bc)" )',
                ]
                if self.program == 'openifs':
                    # what the model wrote as output: its GRIB files' bytes
                    self.prerun_cmds.append(
                        f'echo "output bytes=$(cat {out}/ICM* | wc -c)"')
        self.prerun_cmds.append(f'rm -rf {out}')
        self.executable = 'bash'
        self.executable_opts = ['-c', "'for i in " + ' '.join(map(str, range(self.repeats)))
                                + '; do darshan-parser --total --file run-$i.darshan > '
                                'profile-$i.txt || exit 1; done\'']
        self.keep_files = [f'profile-{i}.txt' for i in range(self.repeats)]

    def _seconds(self, kind):
        return sn.extractall(rf'^run={kind} i=\d+ rc=0 seconds=([0-9.]+)$', self.stdout, 1,
                             float)

    def _profiles(self):
        return [f'profile-{i}.txt' for i in range(self.repeats)]

    def expected_min_bytes(self):
        """What the program is given to write (IOR: exactly that)."""
        if self.program == 'ior':
            return self.num_tasks * self.ior_block_mib * MIB
        if self.program == 'fdb-archive':
            steps, members, params = FDB_FIELDS
            return (sn.extractsingle(r'^template bytes=(\d+)$', self.stdout, 1, int)
                    * steps * members * params)
        if self.program == 'openifs':
            return sn.max(sn.extractall(r'^output bytes=(\d+)$', self.stdout, 1, int))
        if self.program == 'multio':
            return (sn.extractsingle(r'^template bytes=(\d+)$', self.stdout, 1, int)
                    * MULTIO_STEPS * MULTIO_PARAMS)
        return netcdf.expected_bytes(NETCDF_MODEL, NETCDF_DAYS)

    @sanity_function
    def validate(self):
        written = parsed(darshan.figure, self._profiles()[0], name='posix_bytes_written')
        mpiio = parsed(darshan.figure, self._profiles()[0], name='mpiio_bytes_written')
        checks = [
            sn.assert_eq(sn.count(self._seconds('plain')), self.repeats,
                         msg='not every plain run exited with 0 ({0} of {1})'),
            sn.assert_eq(sn.count(self._seconds('darshan')), self.repeats,
                         msg='not every profiled run exited with 0 ({0} of {1})'),
            sn.assert_eq(parsed(darshan.counts_differ, *self._profiles()), [],
                         msg="Darshan's counts differ between runs: {0}"),
        ]
        if not self.record_counts:
            checks.append(self._counts_as_recorded())
        if self.program == 'ior':
            checks.append(sn.assert_eq(written, self.expected_min_bytes()))
        elif self.program == 'pnetcdf':
            checks.append(sn.assert_ge(mpiio, netcdf.expected_bytes(NETCDF_MODEL, NETCDF_DAYS)))
        elif self.program == 'openifs':
            # the IFS's CIO writes its GRIB files through stdio (fwrite)
            checks.append(sn.assert_ge(parsed(darshan.figure, self._profiles()[0],
                                              name='stdio_bytes_written'),
                                       self.expected_min_bytes()))
        elif self.program == 'netcdf-c':
            checks.append(sn.assert_ge(written, netcdf.expected_bytes(NETCDF_MODEL, NETCDF_DAYS)))
        else:
            checks.append(sn.assert_ge(written, self.expected_min_bytes()))
        return sn.all(checks)

    def _references_file(self) -> pathlib.Path:
        return COUNT_REFERENCES / f'darshan-{context.site_of(self.current_partition)}.yaml'

    def _recorded(self) -> tuple[pathlib.Path, dict]:
        """The site's references file and what it holds ({} where there is none yet)."""
        path = self._references_file()
        return path, (yaml.safe_load(path.read_text()) if path.is_file() else {}) or {}

    @sn.deferrable
    def _counts_as_recorded(self):
        """The build's recorded operation counts, exactly: an extra write, read, open or
        sync is a regression (darshan.GATED)."""
        path, recorded = self._recorded()
        build = build_of(context.release_lock(), self.program)
        entry = recorded.get(self.program) or {}
        record = (f'record them: bin/iostack nightly -- -n "DarshanProfileCheck%program='
                  f'{self.program}" -S DarshanProfileCheck.record_counts=yes, then commit '
                  f'reframe-tests/references/counts/{path.name}')
        if entry.get('build') != build:
            raise SanityError(f'no Darshan counts of {self.program} for this build ({build}; '
                              f'{path.name} has {entry.get("build")}): {record}')
        with open(f'{self.stagedir}/{self._profiles()[0]}') as f:
            moves = darshan.moved(entry['counts'], f.read())
        if moves:
            raise SanityError(f"Darshan's counts of {self.program} moved from {path.name}: "
                              + '; '.join(moves))
        return True

    @run_after('sanity')
    def write_counts(self):
        if not self.record_counts:
            return
        path, recorded = self._recorded()
        with open(f'{self.stagedir}/{self._profiles()[0]}') as f:
            recorded[self.program] = {'build': build_of(context.release_lock(), self.program),
                                      'counts': darshan.gated(f.read())}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('# Darshan\'s operation counts per program of DarshanProfileCheck, one run, '
                        'for the build named\n# (checks/darshan_profile.py; '
                        '-S DarshanProfileCheck.record_counts=yes writes them)\n'
                        + yaml.safe_dump(dict(sorted(recorded.items())), sort_keys=True))

    @run_before('performance')
    def set_perf_variables(self):
        first = self._profiles()[0]
        for name in (*darshan.PROFILE, *darshan.FILES):
            unit = ('s' if name.endswith('seconds') else 'B' if 'bytes' in name else
                    'files' if 'files' in name else 'ops')
            self.perf_variables[name] = sn.make_performance_function(
                parsed(darshan.figure, first, name=name), unit)

    @performance_function('s')
    def plain_seconds(self):
        return median(*sn.evaluate(self._seconds('plain')))

    @performance_function('fraction')
    def darshan_overhead(self):
        return (median(*sn.evaluate(self._seconds('darshan')))
                / median(*sn.evaluate(self._seconds('plain'))) - 1)
