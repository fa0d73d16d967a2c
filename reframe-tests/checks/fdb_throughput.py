"""FDB archive throughput against the raw write bandwidth of the same file system.

[OIFS-HECToR] tuned FDB's writer (async write, buffer sizes, sync on flush) against Lustre and
found run-to-run and directory-to-directory variation larger than most settings' effect. So
the figure here is relative: FDB's archive throughput (fdb-hammer, FDB's own benchmark)
divided by the sequential write bandwidth fio measures in the same job, in the same
directory, with the same number of bytes and an fsync at the end. The job repeats the
fio + fdb-hammer pair (`repeats`) and reports the median of the pairs' ratios; absolute
MiB/s (medians) are kept as informational performance variables. One measurement runs per
node at a time (a lock in iostack_rfm/templates/fdb-throughput.sh).

FDB 5.10.8 tunables, each confirmed on the Debian build (gdb on the handles' constructors,
strace of the writes and syncs) before being made a parameter here:
- FDB_ASYNC_WRITE (fdbAsyncWrite): archive through eckit's AIOHandle;
- fdbSizeAsyncBuffer / fdbNbAsyncBuffers: that handle's buffers (async only);
- fdbBufferSize: the synchronous FDBFileHandle's buffer;
- FDB_DATA_SYNC_ON_FLUSH (fdbDataSyncOnFlush): fdatasync of the data files on flush.
The two with environment variables are set that way; the others have none in 5.10.8 and
are read from eckit's resource file $FDB_HOME/etc/config/local, which the job writes.

fdb-hammer 5.10.8 quirks the workload works around: its reader asks for the template's
level whatever --nlevels says, so the template is on level 1 and nlevels is 1; and its
parameter ids 8 and up need other product templates, so nparams is at most 7. The
template is an ensemble member (type pf, stream enfo) because fdb-hammer sets `number`.
"""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (fixture, parameter, performance_function, run_after,
                                   run_before, sanity_function, variable)

from iostack import paths
from iostack_rfm import fdb
from iostack_rfm.base import IostackMixin, parsed
from iostack_rfm.builds import GribGenBuild

MiB = 1024 * 1024

# Fields per run: nsteps x nensembles x nparams, 2 MiB each (0.25 degree, 16 bits).
WORKLOADS = {
    # CI-sized nodes: about 55 MiB, seconds
    'small': {'nsteps': 4, 'nensembles': 1, 'nparams': 7},
    # cluster partitions: about 1 GiB per run (x repeats, plus fio's as much again)
    'large': {'nsteps': 18, 'nensembles': 4, 'nparams': 7},
}
GRID = (721, 1440)
SCRIPT = paths.REFRAME_DIR / 'iostack_rfm' / 'templates' / 'fdb-throughput.sh'


@rfm.simple_test
class FdbThroughputCheck(IostackMixin, rfm.RunOnlyRegressionTest):
    descr = 'FDB archive throughput / raw write bandwidth of the same file system ([OIFS-HECToR])'
    size = parameter(['small', 'large'])
    async_write = parameter([False, True])
    data_sync_on_flush = parameter([True, False])
    #: fdbBufferSize (synchronous) or fdbSizeAsyncBuffer (async), MiB; 64 is the default
    buffer_mib = parameter([64, 4])
    nb_async_buffers = variable(int, value=4)
    #: fio + fdb-hammer pairs per job; the figures are medians over them
    repeats = variable(int, value=3)
    gribgen = fixture(GribGenBuild, scope='environment')
    valid_prog_environs = ['+fdb']
    executable = 'fdb-hammer'
    num_tasks = 1

    @run_after('init')
    def choose_partitions_and_tags(self):
        # the small workload where the node is CI-sized, the large one everywhere else
        self.valid_systems = ['+fdb +small-io'] if self.size == 'small' else ['+fdb -small-io']
        self.tags = {'fdb', 'performance', 'weekly'}
        if self.buffer_mib == 64:
            self.tags.add('nightly')

    @property
    def workload(self):
        return WORKLOADS[self.size]

    @property
    def expected_fields(self):
        w = self.workload
        return w['nsteps'] * w['nensembles'] * w['nparams']

    def _hammer_args(self):
        w = self.workload
        return [f'--nsteps={w["nsteps"]}', f'--nensembles={w["nensembles"]}',
                f'--nparams={w["nparams"]}', '--nlevels=1', '--number=1',
                '--expver=0001', '--class=od']

    @run_before('run')
    def set_job(self):
        io = self.io_dir()
        gribgen = self.gribgen.program_path
        buffer_bytes = self.buffer_mib * MiB
        self.env_vars.update({
            'FDB5_CONFIG_FILE': '$PWD/fdb-config.yaml',
            'FDB_HOME': '$PWD/fdb-home',
            'FDB_ASYNC_WRITE': int(self.async_write),
            'FDB_DATA_SYNC_ON_FLUSH': int(self.data_sync_on_flush),
        })
        resources = (f'fdbBufferSize: {buffer_bytes}\\n'
                     f'fdbSizeAsyncBuffer: {buffer_bytes}\\n'
                     f'fdbNbAsyncBuffers: {self.nb_async_buffers}\\n')
        self.prerun_cmds = [
            'mkdir -p fdb-home/etc/config',
            f"printf '{resources}' > fdb-home/etc/config/local",
            # one ensemble-member field on level 1 as fdb-hammer's template
            f'{gribgen} fields.grib 1 1 {GRID[0]} {GRID[1]}',
            'grib_copy -w count=1 fields.grib first.grib',
            'grib_set -s productDefinitionTemplateNumber=1,type=pf,stream=enfo,number=1,level=1'
            ' first.grib template.grib',
        ]
        self.executable = 'bash'
        self.executable_opts = [str(SCRIPT), io, str(self.repeats), str(self.expected_fields),
                                'template.grib', *self._hammer_args()]
        if io != self.stagedir:
            self.postrun_cmds = [f'rmdir {io} 2>/dev/null || true']

    def _stat(self, name, path, conv=float):
        return sn.extractsingle(rf'^{name}:\s*(\S+)', path, 1, conv)

    @property
    def hammer_outputs(self):
        return [f'hammer-write-{i}.out' for i in range(1, self.repeats + 1)]

    @property
    def fio_outputs(self):
        return [f'fio-write-{i}.json' for i in range(1, self.repeats + 1)]

    @sanity_function
    def validate(self):
        n, r = self.expected_fields, self.repeats
        written = parsed(fdb.hammer_stats, self.hammer_outputs, name='Bytes written')
        return sn.all([
            sn.assert_eq(sn.count(sn.findall(r'fio rc=0', self.stdout)), r),
            sn.assert_eq(sn.count(sn.findall(r'fdb-hammer write rc=0', self.stdout)), r),
            sn.assert_found(r'fdb-hammer read rc=0', self.stdout),
            sn.assert_eq(parsed(fdb.hammer_stats, self.hammer_outputs, name='Fields written'),
                         [n] * r),
            # every archived field is listed, and read back in full
            sn.assert_eq(sn.extractsingle(r'fields listed=(\d+)', self.stdout, 1, int), n),
            sn.assert_eq(self._stat('Fields read', 'hammer-read.out', int), n),
            sn.assert_eq(self._stat('Bytes read', 'hammer-read.out', float), sn.max(written)),
            # fio wrote as many bytes as FDB archived
            sn.assert_eq(parsed(fdb.written_bytes_problems, self.hammer_outputs,
                                self.fio_outputs), [], msg='{0}'),
        ])

    @performance_function('MiB/s')
    def fdb_write_bw(self):
        return parsed(fdb.median_fdb_write_bw, self.hammer_outputs)

    @performance_function('MiB/s')
    def raw_write_bw(self):
        return parsed(fdb.median_raw_write_bw, self.fio_outputs)

    @performance_function('ratio')
    def fdb_write_ratio(self):
        return parsed(fdb.median_write_ratio, self.hammer_outputs, self.fio_outputs)

    @performance_function('MiB/s')
    def fdb_read_bw(self):
        return sn.extractsingle(r'^Total rate:\s*(\S+) MB / s', 'hammer-read.out', 1, float)
