"""IOR and mdtest ([POP-GBmolDD] and [IO500-OFP]): the I/O patterns of the GBmolDD audit.

IorLayoutCheck: one job writes and reads the same bytes twice, first one file per process
(`-F`, GBmolDD's output) then one shared file (the audit's advice: MPI-IO, parallel NetCDF
or HDF5), each verified by IOR itself (-W: read back after write, -R: after read), with its
JSON summary (`-O summaryFormat=JSON`) showing the tasks, repetitions, layout and aggregate
size asked for. With the POSIX API the data go to the device, not the page cache
(`--posix.odirect`, `direct_io`): a slower disk is what the write figures are there to see.
Performance: the median write and read MiB/s of the repetitions for both layouts, each with
its spread ((max - min) / median), and the shared/per-process ratio of the writes.

MdtestScalingCheck: mdtest with a growing number of processes, creating, stat-ing, reading
and removing `files_per_task` empty files per process in one shared directory and then in a
directory per process; the summary must count tasks x files. The creation rate against the
process count is the metadata cost [POP-GBmolDD] saw grow. Rates are the median of 3
iterations, with their spread. On a CI-sized node the files go to a memory file system
(`small_metadata_dir`, /dev/shm), 10,000 a process: the node's disk file system (ext4
without a journal on the CI VMs) will not reuse an inode freed in the last 60-360 s and
scans past each one on every create, so there a creation rate measured how many files
other checks (IO500's mdtest phases, the previous run) had just deleted near it: 800-
9,000 ops/s on most runs, 24,000-158,000 when nothing had (reframe-tests/README.md).

IOR is not a Debian package: these run where the stack has an `ior` module (feature `ior`).
On a CI-sized node (`+small-io`) they run on one node with sizes of tens of MiB (`size`).
"""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (parameter, performance_function, run_after, run_before,
                                   sanity_function, variable)

from iostack_rfm.parsers import ior
from iostack_rfm.base import AppCheck, parsed

LAYOUTS = {'fpp': True, 'shared': False}
#: processes mdtest runs on a CI-sized node (one per core of a 2-core node)
MDTEST_SMALL_PROCESSES = 2
MDTEST_DIRS = {'shared-dir': [], 'unique-dir': ['-u']}


class IorBenchmark(AppCheck):
    """A job of steps: prepare a data directory on the shared I/O file system, run one step
    per pattern, clean up; the sanity asks each pattern's output for its problems."""

    app_features = ['ior']
    time_limit = '1h'
    #: small: a CI-sized node's disk, on one node; large: a cluster's file system
    size = parameter(['small', 'large'])

    @run_after('init')
    def select_partitions_by_size(self):
        self.valid_systems = ['+mpi +small-io'] if self.size == 'small' else ['+mpi -small-io']
        if self.size == 'small':
            self.time_limit = '10m'

    #: {pattern: shell line}, set by the check before the run
    patterns = variable(dict, value={})

    def data_dir(self, name):
        return f'{self.shared_io_dir()}/{name}-data'

    def set_pattern_steps(self, data):
        self.prerun_cmds = [self.step('prepare', f'rm -rf {data} && mkdir -p {data}')]
        self.prerun_cmds += [self.step(name, line) for name, line in self.patterns.items()]
        self.prerun_cmds.append(self.step('cleanup', f'rm -rf {data}'))
        self.executable = 'true'

    def pattern_files(self, name):
        """The files a pattern's `problems` reads (default: its output)."""
        return [f'{name}.out']

    def patterns_ok(self, problems, expected):
        """Sanity: every step exited 0, and `problems` finds none in each pattern's files
        ({pattern: what was asked of it, as keyword arguments of `problems`})."""
        return sn.all([self.steps_ok(['prepare', *self.patterns, 'cleanup'])] + [
            sn.assert_eq(parsed(problems, *self.pattern_files(name), **expected[name]), [],
                         msg=f'{name}: {{0}}')
            for name in self.patterns])


@rfm.simple_test
class IorLayoutCheck(IorBenchmark):
    descr = 'IOR file per process vs one shared file, data verified ([POP-GBmolDD], [IO500-OFP])'
    api = parameter(['POSIX', 'MPIIO'])
    nodes = parameter([1, 2])
    one_rank_per_core = True
    block = variable(str, value='1g')
    transfer = variable(str, value='1m')
    segments = variable(int, value=1)
    repetitions = variable(int, value=3)
    #: POSIX data to the device (O_DIRECT), past the page cache
    direct_io = variable(bool, value=True)

    @run_after('init')
    def set_tags_and_perf_variables(self):
        self.skip_if(self.size == 'small' and self.nodes != 1, 'a CI-sized node runs one node')
        if self.size == 'small':
            # 256 MiB a rank: a timed write of a few tenths of a second. 32 MiB (about 35 ms
            # here) fit in one 100 ms slice of the kernel's block throttle, so a disk throttled
            # to half its rate went unseen (sensitivity campaign, reframe-tests/README.md)
            self.block = '256m'
        self.tags = {'ior', 'io', 'performance', 'weekly'}
        if (self.api, self.nodes) == ('POSIX', 1):
            self.tags.add('nightly')
        for layout in LAYOUTS:
            for operation in ('write', 'read'):
                self.perf_variables[f'{operation}_{layout}'] = sn.make_performance_function(
                    self._median(layout, operation), 'MiB/s')
                self.perf_variables[f'{operation}_{layout}_spread'] = \
                    sn.make_performance_function(parsed(ior.bandwidth_spread,
                                                        f'ior-{layout}.json',
                                                        operation=operation), 'fraction')

    @run_before('run')
    def set_job(self):
        data = self.data_dir('ior')
        self.patterns = {}
        for layout, fpp in LAYOUTS.items():
            options = (f'-a {self.api} -b {self.block} -t {self.transfer} -s {self.segments} '
                       f'-i {self.repetitions} -w -r -W -R -C -e -g'
                       + (' -F' if fpp else '')
                       + (' --posix.odirect' if self.direct_io and self.api == 'POSIX' else '')
                       + f' -o {data}/{layout}/testfile'
                       + f' -O summaryFormat=JSON -O summaryFile=ior-{layout}.json')
            self.patterns[f'ior-{layout}'] = (f'mkdir -p {data}/{layout} && '
                                              f'{self.mpi_command()} ior {options} '
                                              f'> ior-{layout}.out 2>&1')
        self.set_pattern_steps(data)

    def pattern_files(self, name):
        return [f'{name}.json', f'{name}.out']

    @sanity_function
    def validate(self):
        return self.patterns_ok(ior.ior_problems, {
            f'ior-{layout}': dict(tasks=self.num_tasks, file_per_process=fpp, block=self.block,
                                  segments=self.segments, repetitions=self.repetitions,
                                  api=self.api)
            for layout, fpp in LAYOUTS.items()})

    def _median(self, layout, operation):
        return parsed(ior.median_bandwidth, f'ior-{layout}.json', operation=operation)

    @performance_function('ratio')
    def write_shared_vs_fpp(self):
        return self._median('shared', 'write') / self._median('fpp', 'write')


@rfm.simple_test
class MdtestScalingCheck(IorBenchmark):
    descr = 'mdtest create/stat/read/remove against process count ([POP-GBmolDD])'
    #: MPI processes; several nodes' worth where a node has fewer cores
    processes = parameter([MDTEST_SMALL_PROCESSES, 16, 64, 256])
    files_per_task = variable(int, value=1000)
    iterations = variable(int, value=3)
    #: where a CI-sized node's mdtest creates its files: a memory file system, whose
    #: creation rate is the kernel's metadata path and no history of the disk's allocator
    small_metadata_dir = variable(str, value='/dev/shm')

    @run_after('init')
    def set_tags_and_tasks(self):
        self.skip_if((self.size == 'small') != (self.processes == MDTEST_SMALL_PROCESSES),
                     f'a CI-sized node runs {MDTEST_SMALL_PROCESSES} processes, a cluster more')
        if self.size == 'small':
            # a creation phase of about 0.1 s on /dev/shm (200 a process lasted 2 ms there)
            self.files_per_task = 10000
        self.num_tasks = self.processes
        self.tags = {'mdtest', 'io', 'metadata', 'performance', 'weekly'}
        if self.processes in (16, MDTEST_SMALL_PROCESSES):
            self.tags.add('nightly')
        for mode in MDTEST_DIRS:
            for op in ('File creation', 'File stat', 'File removal'):
                name = f'{op.split()[1]}_{mode.replace("-", "_")}'
                self.perf_variables[name] = sn.make_performance_function(
                    parsed(ior.mdtest_rate, f'mdtest-{mode}.out', operation=op), 'ops/s')
                self.perf_variables[f'{name}_spread'] = sn.make_performance_function(
                    parsed(ior.mdtest_spread, f'mdtest-{mode}.out', operation=op), 'fraction')

    @run_after('setup')
    def fill_nodes(self):
        cpus = self.current_partition.processor.num_cpus or self.processes
        self.num_tasks_per_node = min(self.processes, cpus)

    @run_before('run')
    def set_job(self):
        data = self.data_dir('mdtest')
        if self.size == 'small':
            data = (f'{self.small_metadata_dir}/{self.current_system.name}-'
                    f'{self.short_name}-mdtest-data')
        self.patterns = {}
        for mode, options in MDTEST_DIRS.items():
            args = ' '.join(['-F', '-n', str(self.files_per_task), '-i', str(self.iterations),
                             *options, '-d', f'{data}/{mode}'])
            self.patterns[f'mdtest-{mode}'] = (f'{self.mpi_command()} mdtest {args} '
                                               f'> mdtest-{mode}.out 2>&1')
        self.set_pattern_steps(data)

    @sanity_function
    def validate(self):
        asked = dict(tasks=self.num_tasks, files_per_task=self.files_per_task,
                     iterations=self.iterations)
        return self.patterns_ok(ior.mdtest_problems,
                                {f'mdtest-{mode}': asked for mode in MDTEST_DIRS})
