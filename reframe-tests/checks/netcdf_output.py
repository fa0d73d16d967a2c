"""Parallel NetCDF output of the INM RAS earth-system model ([INMCM-NetCDF]): the four ways the
seed compares (serial direct-access files from rank 0, separate NetCDF file per field,
combined file per output type, batching several records in memory before writing), run one
after the other in one job by src/netcdf-output-bench: the release's own, through its
module (environment feature `netcdf-output-bench`), never a copy built here.

Durability is explicit (`--sync`): netCDF-C syncs each file at enddef and at close (HDF5,
MPI_File_sync) while the serial files and PnetCDF never sync by themselves, so without a
rule serial wins by writing into the page cache. The gated figure is the seed's regime,
output that must be on disk when the step ends: every mode at `--sync step` (fsync,
nc_sync, ncmpi_sync of each file an output step wrote). Serial and batching run again at
`--sync none` (only the libraries' own syncs), for information.

Correctness, per mode: the benchmark's own read-back (--verify: every value, fields and
records counted, checksum) is OK; it wrote exactly the workload's bytes (the seed's 79.5 MB
per INMCM6P day) into the mode's expected number of files, which are counted on disk
too; and every run's data checksum is the same (the values are a function of their
position, whatever the mode, library, access, sync or rank count).

Performance: at `--sync step` each mode's time (the slowest rank's, file creation to close)
and its phases (create/define, write, close: each the slowest rank's), and the
batching/serial speedup (serial seconds / batching seconds) the seed reports batching to
win: serial and batching run `repeats` times, interleaved, and their times and speedup are
the medians over the repeats, with the speedup's spread beside it; the same speedup at
`--sync none`; with netCDF-C also combined and batching with independent access, and
combined's collective/independent time ratio (the seed recommends collective access at
scale). The bytes written are correctness, asserted in the sanity function, not a figure.

NetcdfOutputScalingCheck (weekly) sweeps the ranks, 1, 2, 4, ... up to a node's cores, for
both grids (INMCM6P and INMCM6M), serial against batching at `--sync step`.
"""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (parameter, run_after,
                                   run_before, sanity_function, variable)

from iostack_rfm.parsers import netcdf
from iostack_rfm.base import AppCheck, median, spread

SIZES = {
    # CI-sized nodes: one INMCM6P day on 2 ranks, seconds per mode
    'small': {'model': 'inmcm6p', 'days': 1},
    # clusters: five INMCM6M days (1.5 GB per mode) on a node's cores
    'large': {'model': 'inmcm6m', 'days': 5},
}
PHASES = ('create', 'write', 'close')


def _summary_field(run, key, conv=str):
    return sn.extractsingle(rf'^netcdf-output-bench:.*?\s{key}=(\S+)', f'{run}.out', 1, conv)


def _verify_field(run, key, conv=str):
    return sn.extractsingle(rf'^verify: OK .*\b{key}=(\S+)', f'{run}.out', 1, conv)


class NetcdfOutputRuns(AppCheck):
    """Runs of the benchmark as steps of one job, each checked in full."""

    app_features = ['netcdf', 'netcdf-output-bench']
    library = parameter(['netcdf', 'pnetcdf'])
    #: records held per field in batching mode (the benchmark's default)
    batch = variable(int, value=8)
    time_limit = '30m'

    def runs(self):
        """{run name: (mode, extra benchmark options, ranks)} of the job."""
        raise NotImplementedError

    @property
    def workload(self):
        """{'model': grid, 'days': simulated days}"""
        raise NotImplementedError

    @property
    def expected_bytes(self):
        return netcdf.expected_bytes(self.workload['model'], self.workload['days'])

    def _launch(self, ranks):
        """The MPI launch of `ranks` of the job's ranks."""
        total = self.num_tasks
        self.num_tasks = ranks
        try:
            return self.mpi_command()
        finally:
            self.num_tasks = total

    @run_before('run')
    def set_job(self):
        out = f'{self.shared_io_dir()}/netcdf-output'
        self.prerun_cmds = [f'mkdir -p {out}']
        for run, (mode, options, ranks) in self.runs().items():
            args = (f'--mode {mode} --library {self.library} --model {self.workload["model"]} '
                    f'--days {self.workload["days"]} --batch {self.batch} {options} '
                    f'--output-dir {out}/{run} --verify')
            self.prerun_cmds += [
                self.step(f'write-{run}', f'rm -rf {out}/{run} && {self._launch(ranks)} '
                          f'netcdf-output-bench {args} > {run}.out 2> {run}.err'),
                # counted by the file system, not by the benchmark
                self.step(f'count-{run}',
                          f'echo "on-disk run={run} files=$(find {out}/{run} -type f | wc -l)'
                          f' bytes=$(du -sb {out}/{run} | cut -f1)" && rm -rf {out}/{run}'),
            ]
        self.executable = 'rmdir'
        self.executable_opts = [out]
        # each run's summary, which the figures are read from, stays with the session's output
        self.keep_files = [f'{run}.out' for run in self.runs()]

    @sanity_function
    def validate(self):
        runs = self.runs()
        checks = [self.steps_ok([f'{s}-{r}' for r in runs for s in ('write', 'count')])]
        for run, (mode, _, ranks) in runs.items():
            files = netcdf.expected_files(mode)
            checks += [
                sn.assert_eq(_summary_field(run, 'mode'), mode),
                sn.assert_eq(_summary_field(run, 'ranks', int), ranks),
                sn.assert_eq(_summary_field(run, 'bytes', int), self.expected_bytes),
                sn.assert_eq(_summary_field(run, 'files', int), files),
                sn.assert_eq(sn.extractsingle(rf'^on-disk run={run} files=(\d+)', self.stdout,
                                              1, int), files),
                # values, plus NetCDF headers and coordinates of a few percent
                sn.assert_bounded(sn.extractsingle(rf'^on-disk run={run} .*bytes=(\d+)',
                                                   self.stdout, 1, int),
                                  self.expected_bytes, 1.05 * self.expected_bytes),
                sn.assert_eq(_verify_field(run, 'fields', int), netcdf.fields()),
                sn.assert_eq(_verify_field(run, 'records', int),
                             netcdf.expected_records(self.workload['days'])),
                sn.assert_eq(_verify_field(run, 'mismatches', int), 0),
                sn.assert_eq(_verify_field(run, 'checksum'), _summary_field(run, 'checksum')),
            ]
        checksums = [_summary_field(run, 'checksum') for run in runs]
        checks.append(sn.assert_eq(sn.count_uniq(sn.map(sn.evaluate, checksums)), 1,
                                   msg='runs wrote different data: {0} checksums'))
        return sn.all(checks)

    def seconds(self, run, phase=None):
        return _summary_field(run, f'{phase}_seconds' if phase else 'seconds', float)



@rfm.simple_test
class NetcdfOutputCheck(NetcdfOutputRuns):
    descr = ('NetCDF output: serial/separate/combined/batching at --sync step and none, '
             'verified ([INMCM-NetCDF])')
    size = parameter(['small', 'large'])
    num_tasks = 2
    #: runs of serial and batching at `--sync step` (interleaved); figures are their medians
    repeats = variable(int, value=3)

    @run_after('init')
    def choose_partitions_and_tags(self):
        self.valid_systems = ['+mpi +small-io'] if self.size == 'small' else ['+mpi -small-io']
        self.tags = {'netcdf', 'io', 'bit-identity', 'performance', 'nightly'}

    @run_after('setup')
    def use_a_node(self):
        if self.size == 'large':
            # one rank per core of a node; the seed's INMCM6M runs used 84 to 360
            self.num_tasks = self.current_partition.processor.num_cpus or 36

    @property
    def workload(self):
        return SIZES[self.size]

    def repeat_runs(self, mode):
        """The names of `mode`'s runs at --sync step, the first one being `mode`."""
        return [mode] + [f'{mode}-r{i}' for i in range(2, self.repeats + 1)]

    def runs(self):
        n = self.num_tasks
        runs = {mode: (mode, '--sync step', n) for mode in netcdf.MODES}
        for i in range(1, self.repeats):
            for mode in ('serial', 'batching'):
                runs[self.repeat_runs(mode)[i]] = (mode, '--sync step', n)
        runs.update({f'{mode}-sync-none': (mode, '--sync none', n)
                     for mode in ('serial', 'batching')})
        if self.library == 'netcdf':
            runs.update({f'{mode}-independent': (mode, '--sync step --access independent', n)
                         for mode in ('combined', 'batching')})
        return runs

    @run_after('init')
    def set_perf_variables(self):
        perf = self.perf_variables
        for mode in netcdf.MODES:
            runs = self.repeat_runs(mode) if mode in ('serial', 'batching') else [mode]
            perf[f'seconds_{mode}'] = sn.make_performance_function(
                median(*(self.seconds(run) for run in runs)), 's')
            for phase in PHASES:
                perf[f'{phase}_seconds_{mode}'] = sn.make_performance_function(
                    median(*(self.seconds(run, phase) for run in runs)), 's')
        speedups = [self.seconds(serial) / self.seconds(batching) for serial, batching in
                    zip(self.repeat_runs('serial'), self.repeat_runs('batching'), strict=True)]
        perf['speedup_batching_serial_sync_step'] = sn.make_performance_function(
            median(*speedups), 'x')
        perf['speedup_batching_serial_sync_step_spread'] = sn.make_performance_function(
            spread(*speedups), 'fraction')
        perf['seconds_batching_spread'] = sn.make_performance_function(
            spread(*(self.seconds(run) for run in self.repeat_runs('batching'))), 'fraction')
        perf['speedup_batching_serial_sync_none'] = sn.make_performance_function(
            self.seconds('serial-sync-none') / self.seconds('batching-sync-none'), 'x')
        if self.library == 'netcdf':
            for mode in ('combined', 'batching'):
                perf[f'seconds_{mode}_independent'] = sn.make_performance_function(
                    self.seconds(f'{mode}-independent'), 's')
            perf['collective_over_independent_combined'] = sn.make_performance_function(
                self.seconds('combined') / self.seconds('combined-independent'), 'x')


@rfm.simple_test
class NetcdfOutputScalingCheck(NetcdfOutputRuns):
    descr = ('NetCDF output: serial and batching at --sync step on 1, 2, 4, ... ranks, '
             'INMCM6P and INMCM6M ([INMCM-NetCDF])')
    valid_systems = ['+mpi']
    model = parameter(['inmcm6p', 'inmcm6m'])
    tags = {'netcdf', 'io', 'performance', 'weekly'}
    num_tasks = 2

    @run_after('setup')
    def use_a_node(self):
        self.num_tasks = self.current_partition.processor.num_cpus or 2
        for n in self.rank_counts():
            for mode in ('serial', 'batching'):
                self.perf_variables[f'seconds_{mode}_ranks_{n}'] = \
                    sn.make_performance_function(self.seconds(f'{mode}-{n}'), 's')
            self.perf_variables[f'speedup_batching_serial_ranks_{n}'] = \
                sn.make_performance_function(
                    self.seconds(f'serial-{n}') / self.seconds(f'batching-{n}'), 'x')

    @property
    def workload(self):
        return {'model': self.model, 'days': 1}

    def rank_counts(self):
        n = self.num_tasks
        return [2 ** k for k in range(n.bit_length()) if 2 ** k < n] + [n]

    def runs(self):
        return {f'{mode}-{n}': (mode, '--sync step', n)
                for n in self.rank_counts() for mode in ('serial', 'batching')}
