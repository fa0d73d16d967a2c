"""IOR and mdtest (seeds 001 and 004): the I/O patterns of the GBmolDD audit.

IorLayoutCheck: one job writes and reads the same bytes twice, first one file per process
(`-F`, GBmolDD's output) then one shared file (the audit's advice: MPI-IO, parallel NetCDF
or HDF5), each verified by IOR itself (-W: read back after write, -R: after read), with the
summary showing the tasks, repetitions, layout and aggregate size asked for. Performance:
write and read MiB/s of both layouts and shared/per-process ratio of the writes.

MdtestScalingCheck: mdtest with a growing number of processes, creating, stat-ing, reading
and removing `files_per_task` empty files per process in one shared directory and then in a
directory per process; the summary must count tasks x files. The creation rate against the
process count is the metadata cost seed 001 saw grow.

Both can run under Darshan (parameter `darshan`, environment feature `darshan`): each step's
log is read with darshan-parser and its POSIX metadata time reported.

IOR is not a Debian package: these run where the stack has an `ior` module (feature `ior`).
"""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (parameter, performance_function, run_after, run_before,
                                   sanity_function, variable)

from iostack_rfm.apps.base import AppCheck, WholeNodes, shared_io_dir
from iostack_rfm.apps.ior import (DarshanOption, darshan_counter, ior_problems, ior_summary,
                                  mdtest_problems, mdtest_rate)

LAYOUTS = {'fpp': True, 'shared': False}
MDTEST_DIRS = {'shared-dir': [], 'unique-dir': ['-u']}


@sn.deferrable
def _ior_problems(path, **expected):
    with open(path) as f:
        return ior_problems(f.read(), **expected)


@sn.deferrable
def _mdtest_problems(path, **expected):
    with open(path) as f:
        return mdtest_problems(f.read(), **expected)


@rfm.simple_test
class IorLayoutCheck(WholeNodes, DarshanOption, AppCheck):
    descr = 'IOR file per process vs one shared file, data verified (seeds 001, 004)'
    valid_systems = ['+mpi -small-io']
    app_features = ['ior']
    api = parameter(['POSIX', 'MPIIO'])
    nodes = parameter([1, 2])
    block = variable(str, value='1g')
    transfer = variable(str, value='1m')
    segments = variable(int, value=1)
    repetitions = variable(int, value=3)
    time_limit = '1h'

    @run_after('init')
    def set_tags(self):
        self.tags = {'ior', 'io', 'performance', 'weekly'}
        if (self.api, self.nodes, self.darshan) == ('POSIX', 1, False):
            self.tags.add('nightly')
        if self.darshan:
            for layout in LAYOUTS:
                self.perf_variables[f'posix_meta_seconds_{layout}'] = \
                    sn.make_performance_function(darshan_counter(
                        f'ior-{layout}.darshan.txt', 'total_POSIX_F_META_TIME'), 's')

    @run_before('run')
    def set_job(self):
        data = f'{shared_io_dir(self)}/ior-data'
        self.prerun_cmds = [self.step('prepare', f'rm -rf {data} && mkdir -p {data}')]
        for layout, fpp in LAYOUTS.items():
            options = (f'-a {self.api} -b {self.block} -t {self.transfer} -s {self.segments} '
                       f'-i {self.repetitions} -w -r -W -R -C -e -g'
                       + (' -F' if fpp else '') + f' -o {data}/{layout}/testfile')
            self.prerun_cmds += [
                f'mkdir -p {data}/{layout}',
                self.step(f'ior-{layout}', f'{self.darshan_prefix(f"ior-{layout}")}'
                          f'{self.mpi_command()} ior {options} > ior-{layout}.out 2>&1'),
            ]
            if self.darshan:
                self.prerun_cmds.append(self.step(f'darshan-{layout}',
                                                  self.darshan_report(f'ior-{layout}')))
        self.prerun_cmds.append(self.step('cleanup', f'rm -rf {data}'))
        self.executable = 'true'

    @sanity_function
    def validate(self):
        steps = (['prepare', 'cleanup'] + [f'ior-{layout}' for layout in LAYOUTS]
                 + ([f'darshan-{layout}' for layout in LAYOUTS] if self.darshan else []))
        checks = [self.steps_ok(steps)]
        for layout, fpp in LAYOUTS.items():
            checks.append(sn.assert_eq(
                _ior_problems(f'ior-{layout}.out', tasks=self.num_tasks, file_per_process=fpp,
                              block=self.block, segments=self.segments,
                              repetitions=self.repetitions, api=self.api), [],
                msg=f'IOR {layout}: {{0}}'))
        return sn.all(checks)

    @performance_function('MiB/s')
    def write_fpp(self):
        return ior_summary('ior-fpp.out', 'write', 'Mean(MiB)')

    @performance_function('MiB/s')
    def read_fpp(self):
        return ior_summary('ior-fpp.out', 'read', 'Mean(MiB)')

    @performance_function('MiB/s')
    def write_shared(self):
        return ior_summary('ior-shared.out', 'write', 'Mean(MiB)')

    @performance_function('MiB/s')
    def read_shared(self):
        return ior_summary('ior-shared.out', 'read', 'Mean(MiB)')

    @performance_function('ratio')
    def write_shared_vs_fpp(self):
        return (ior_summary('ior-shared.out', 'write', 'Mean(MiB)')
                / ior_summary('ior-fpp.out', 'write', 'Mean(MiB)'))


@rfm.simple_test
class MdtestScalingCheck(DarshanOption, AppCheck):
    descr = 'mdtest create/stat/read/remove against process count (seed 001)'
    valid_systems = ['+mpi -small-io']
    app_features = ['ior']
    #: MPI processes; several nodes' worth where a node has fewer cores
    processes = parameter([16, 64, 256])
    files_per_task = variable(int, value=1000)
    iterations = variable(int, value=3)
    time_limit = '1h'

    @run_after('init')
    def set_tags_and_tasks(self):
        self.num_tasks = self.processes
        self.tags = {'mdtest', 'io', 'metadata', 'performance', 'weekly'}
        if self.processes == 16 and not self.darshan:
            self.tags.add('nightly')
        for mode in MDTEST_DIRS:
            for op in ('File creation', 'File stat', 'File removal'):
                name = f'{op.split()[1]}_{mode.replace("-", "_")}'
                self.perf_variables[name] = sn.make_performance_function(
                    mdtest_rate(f'mdtest-{mode}.out', op), 'ops/s')
            if self.darshan:
                self.perf_variables[f'posix_meta_seconds_{mode.replace("-", "_")}'] = \
                    sn.make_performance_function(darshan_counter(
                        f'mdtest-{mode}.darshan.txt', 'total_POSIX_F_META_TIME'), 's')

    @run_after('setup')
    def fill_nodes(self):
        cpus = self.current_partition.processor.num_cpus or self.processes
        self.num_tasks_per_node = min(self.processes, cpus)

    @run_before('run')
    def set_job(self):
        data = f'{shared_io_dir(self)}/mdtest-data'
        self.prerun_cmds = [self.step('prepare', f'rm -rf {data} && mkdir -p {data}')]
        for mode, options in MDTEST_DIRS.items():
            args = ' '.join(['-F', '-n', str(self.files_per_task), '-i', str(self.iterations),
                             *options, '-d', f'{data}/{mode}'])
            self.prerun_cmds.append(self.step(
                f'mdtest-{mode}', f'{self.darshan_prefix(f"mdtest-{mode}")}'
                f'{self.mpi_command()} mdtest {args} > mdtest-{mode}.out 2>&1'))
            if self.darshan:
                self.prerun_cmds.append(self.step(f'darshan-{mode}',
                                                  self.darshan_report(f'mdtest-{mode}')))
        self.prerun_cmds.append(self.step('cleanup', f'rm -rf {data}'))
        self.executable = 'true'

    @sanity_function
    def validate(self):
        steps = (['prepare', 'cleanup'] + [f'mdtest-{mode}' for mode in MDTEST_DIRS]
                 + ([f'darshan-{mode}' for mode in MDTEST_DIRS] if self.darshan else []))
        checks = [self.steps_ok(steps)]
        for mode in MDTEST_DIRS:
            checks.append(sn.assert_eq(
                _mdtest_problems(f'mdtest-{mode}.out', tasks=self.num_tasks,
                                 files_per_task=self.files_per_task,
                                 iterations=self.iterations), [],
                msg=f'mdtest {mode}: {{0}}'))
        return sn.all(checks)
