"""Parallel NetCDF output of the INM RAS earth-system model ([INMCM-NetCDF]): the four ways the seed
compares (serial direct-access files from rank 0, separate NetCDF file per field, combined
file per output type, batching several records in memory before writing), run one after
the other in one job by src/netcdf-output-bench, built here with CMake.

Correctness, per mode: the benchmark's own read-back (--verify: every value, fields and
records counted, checksum) is OK; it wrote exactly the workload's bytes (the seed's 79.5 MB
per INMCM6P day) into the mode's expected number of files, which are counted on disk
too; and every mode's data checksum is the same (the values are a function of their
position, whatever the mode, library or rank count).

Performance: each mode's write time (the slowest rank's, file creation to close), the bytes
written, and the batching/serial speedup (serial seconds / batching seconds) the seed
reports batching to win.
"""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (fixture, parameter, performance_function, run_after,
                                   run_before, sanity_function, variable)

from iostack_rfm import netcdf as workload
from iostack_rfm.base import AppCheck
from iostack_rfm.builds import NetcdfOutputBenchBuild

SIZES = {
    # CI-sized nodes: one INMCM6P day on 2 ranks, seconds per mode
    'small': {'model': 'inmcm6p', 'days': 1},
    # clusters: five INMCM6M days (1.5 GB per mode) on a node's cores
    'large': {'model': 'inmcm6m', 'days': 5},
}


def _summary_field(mode, key, conv=str):
    return sn.extractsingle(rf'^netcdf-output-bench: mode={mode} .*\b{key}=(\S+)',
                            f'{mode}.out', 1, conv)


def _verify_field(mode, key, conv=str):
    return sn.extractsingle(rf'^verify: OK .*\b{key}=(\S+)', f'{mode}.out', 1, conv)


@rfm.simple_test
class NetcdfOutputCheck(AppCheck):
    descr = 'NetCDF output: serial/separate/combined/batching, verified ([INMCM-NetCDF])'
    valid_systems = ['+mpi']
    app_features = ['netcdf']
    library = parameter(['netcdf', 'pnetcdf'])
    size = parameter(['small', 'large'])
    bench = fixture(NetcdfOutputBenchBuild, scope='environment')
    #: records held per field in batching mode (the benchmark's default)
    batch = variable(int, value=8)
    num_tasks = 2
    time_limit = '30m'

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

    @property
    def expected_bytes(self):
        return workload.expected_bytes(self.workload['model'], self.workload['days'])

    @run_before('run')
    def set_job(self):
        out = f'{self.shared_io_dir()}/netcdf-output'
        bench = self.bench.program_path
        self.prerun_cmds = [f'mkdir -p {out}']
        for mode in workload.MODES:
            args = (f'--mode {mode} --library {self.library} --model {self.workload["model"]} '
                    f'--days {self.workload["days"]} --batch {self.batch} '
                    f'--output-dir {out}/{mode} --verify')
            self.prerun_cmds += [
                self.step(f'write-{mode}', f'rm -rf {out}/{mode} && '
                          f'{self.mpi_command()} {bench} {args} > {mode}.out 2> {mode}.err'),
                # counted by the file system, not by the benchmark
                self.step(f'count-{mode}',
                          f'echo "on-disk mode={mode} files=$(find {out}/{mode} -type f | wc -l)'
                          f' bytes=$(du -sb {out}/{mode} | cut -f1)" && rm -rf {out}/{mode}'),
            ]
        self.executable = 'rmdir'
        self.executable_opts = [out]

    @sanity_function
    def validate(self):
        checks = [self.steps_ok([f'{s}-{m}' for m in workload.MODES for s in ('write', 'count')])]
        for mode in workload.MODES:
            files = workload.expected_files(mode)
            checks += [
                sn.assert_eq(_summary_field(mode, 'ranks', int), self.num_tasks),
                sn.assert_eq(_summary_field(mode, 'bytes', int), self.expected_bytes),
                sn.assert_eq(_summary_field(mode, 'files', int), files),
                sn.assert_eq(sn.extractsingle(rf'^on-disk mode={mode} files=(\d+)', self.stdout,
                                              1, int), files),
                # values, plus NetCDF headers and coordinates of a few percent
                sn.assert_bounded(sn.extractsingle(rf'^on-disk mode={mode} .*bytes=(\d+)',
                                                   self.stdout, 1, int),
                                  self.expected_bytes, 1.05 * self.expected_bytes),
                sn.assert_eq(_verify_field(mode, 'fields', int), workload.fields()),
                sn.assert_eq(_verify_field(mode, 'records', int),
                             workload.expected_records(self.workload['days'])),
                sn.assert_eq(_verify_field(mode, 'mismatches', int), 0),
                sn.assert_eq(_verify_field(mode, 'checksum'), _summary_field(mode, 'checksum')),
            ]
        checksums = [_summary_field(mode, 'checksum') for mode in workload.MODES]
        checks.append(sn.assert_eq(sn.count_uniq(sn.map(sn.evaluate, checksums)), 1,
                                   msg='modes wrote different data: {0} checksums'))
        return sn.all(checks)

    @run_after('init')
    def set_perf_variables(self):
        for mode in workload.MODES:
            self.perf_variables[f'seconds_{mode}'] = sn.make_performance_function(
                self._seconds(mode), 's')

    def _seconds(self, mode):
        return _summary_field(mode, 'seconds', float)

    @performance_function('B')
    def bytes_written(self):
        return _summary_field('batching', 'bytes', int)

    @performance_function('x')
    def speedup_batching_serial(self):
        return self._seconds('serial') / self._seconds('batching')
