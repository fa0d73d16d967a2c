"""FDB archive throughput against the raw write bandwidth of the same file system.

Seed 000 tuned FDB's writer (async write, buffer sizes, sync on flush) against Lustre and
found run-to-run and directory-to-directory variation larger than most settings' effect. So
the figure here is relative: FDB's archive throughput (fdb-hammer, FDB's own benchmark)
divided by the sequential write bandwidth fio measures in the same job, in the same
directory, with the same number of bytes and an fsync at the end. Absolute MiB/s of both
are kept as informational performance variables.

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
import json
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (fixture, parameter, performance_function, run_after,
                                   run_before, sanity_function, variable)

from iostack_rfm.fixtures import GribGenBuild
from iostack_rfm.mixins import PartitionLaunch, RecordedReferences, io_dir

MiB = 1024 * 1024

# Fields per run: nsteps x nensembles x nparams, 2 MiB each (0.25 degree, 16 bits).
WORKLOADS = {
    # CI-sized nodes: about 55 MiB, seconds
    'small': {'nsteps': 4, 'nensembles': 1, 'nparams': 7},
    # cluster partitions: about 2.6 GiB, beyond the page cache's write-back burst
    'large': {'nsteps': 48, 'nensembles': 4, 'nparams': 7},
}
GRID = (721, 1440)


@sn.deferrable
def fio_write_bandwidth(path):
    """MiB/s of the first job's write phase in fio's JSON output."""
    with open(path) as f:
        job = json.load(f)['jobs'][0]['write']
    return job['bw_bytes'] / MiB


@sn.deferrable
def fio_write_bytes(path):
    with open(path) as f:
        return json.load(f)['jobs'][0]['write']['io_bytes']


@rfm.simple_test
class FdbThroughputCheck(RecordedReferences, PartitionLaunch, rfm.RunOnlyRegressionTest):
    descr = 'FDB archive throughput / raw write bandwidth of the same file system (seed 000)'
    size = parameter(['small', 'large'])
    async_write = parameter([False, True])
    data_sync_on_flush = parameter([True, False])
    #: fdbBufferSize (synchronous) or fdbSizeAsyncBuffer (async), MiB; 64 is the default
    buffer_mib = parameter([64, 4])
    nb_async_buffers = variable(int, value=4)
    gribgen = fixture(GribGenBuild, scope='environment')
    valid_prog_environs = ['+fdb']
    executable = 'fdb-hammer'
    num_tasks = 1
    maintainers = ['iostack']

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
        io = io_dir(self)
        gribgen = os.path.join(self.gribgen.stagedir, self.gribgen.executable)
        buffer_bytes = self.buffer_mib * MiB
        self.env_vars.update({
            'FDB5_CONFIG_FILE': '$PWD/fdb-config.yaml',
            'FDB_HOME': '$PWD/fdb-home',
            'FDB_ASYNC_WRITE': int(self.async_write),
            'FDB_DATA_SYNC_ON_FLUSH': int(self.data_sync_on_flush),
            'PYTHONPATH': os.path.dirname(os.path.dirname(__file__)) + ':$PYTHONPATH',
        })
        resources = (f'fdbBufferSize: {buffer_bytes}\\n'
                     f'fdbSizeAsyncBuffer: {buffer_bytes}\\n'
                     f'fdbNbAsyncBuffers: {self.nb_async_buffers}\\n')
        self.prerun_cmds = [
            f'IO={io}',
            'mkdir -p "$IO" fdb-home/etc/config',
            f"printf '{resources}' > fdb-home/etc/config/local",
            'python3 -m iostack_rfm.fdbconfig --root "$IO/fdb-root" --out fdb-config.yaml',
            # one ensemble-member field on level 1 as fdb-hammer's template
            f'{gribgen} fields.grib 1 1 {GRID[0]} {GRID[1]}',
            'grib_copy -w count=1 fields.grib first.grib',
            'grib_set -s productDefinitionTemplateNumber=1,type=pf,stream=enfo,number=1,level=1'
            ' first.grib template.grib',
            'FIELD=$(stat -c %s template.grib)',
            f'BYTES=$(( FIELD * {self.expected_fields} ))',
            'echo "raw write bytes=$BYTES"',
            # the file system's own sequential write speed: same bytes, written a field at
            # a time, fsync at the end
            'fio --name=raw-write --filename="$IO/raw-write.dat" --rw=write --bs=$FIELD '
            '--size=$BYTES --ioengine=psync --end_fsync=1 --output-format=json '
            '--output=fio-write.json',
            'rm -f "$IO/raw-write.dat"',
        ]
        self.executable_opts = ['--statistics', *self._hammer_args(), 'template.grib',
                                '> hammer-write.out']
        self.postrun_cmds = [
            'echo "fields listed=$(fdb-list --porcelain class=od,expver=0001 | grep -c "^{")"',
            f'fdb-hammer --read --statistics {" ".join(self._hammer_args())} template.grib '
            '> hammer-read.out',
            'rm -rf "$IO/fdb-root"',
        ]
        if io != self.stagedir:
            self.postrun_cmds.append('rmdir "$IO" 2>/dev/null || true')

    def _stat(self, name, path, conv=float):
        return sn.extractsingle(rf'^{name}:\s*(\S+)', path, 1, conv)

    @sanity_function
    def validate(self):
        n = self.expected_fields
        written_bytes = self._stat('Bytes written', 'hammer-write.out', int)
        return sn.all([
            sn.assert_eq(self._stat('Fields written', 'hammer-write.out', int), n),
            # every archived field is listed, and read back in full
            sn.assert_eq(sn.extractsingle(r'fields listed=(\d+)', self.stdout, 1, int), n),
            sn.assert_eq(self._stat('Fields read', 'hammer-read.out', int), n),
            sn.assert_eq(self._stat('Bytes read', 'hammer-read.out', int), written_bytes),
            # fio wrote as many bytes as FDB archived
            sn.assert_eq(fio_write_bytes('fio-write.json'), written_bytes),
        ])

    @performance_function('MiB/s')
    def fdb_write_bw(self):
        # bytes over the archive+flush time (fdb-hammer's GRIB encoding time excluded)
        return (self._stat('Bytes written', 'hammer-write.out') /
                self._stat('Writing duration', 'hammer-write.out') / MiB)

    @performance_function('MiB/s')
    def raw_write_bw(self):
        return fio_write_bandwidth('fio-write.json')

    @performance_function('ratio')
    def fdb_write_ratio(self):
        return self.fdb_write_bw() / self.raw_write_bw()

    @performance_function('MiB/s')
    def fdb_read_bw(self):
        return sn.extractsingle(r'^Total rate:\s*(\S+) MB / s', 'hammer-read.out', 1, float)
