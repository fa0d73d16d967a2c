"""FDB archive throughput against a raw write of the same bytes, with the same durability, on
the same file system ([OIFS-HECToR]).

[OIFS-HECToR] tuned FDB's writer (async write, buffer sizes, sync on flush) against Lustre and
found run-to-run and directory-to-directory variation larger than most settings' effect. So
the figures here are relative: FDB's archive throughput divided by that of fio writing the
same bytes, a field per write, in the same directory and job, with the same durability
(iostack_rfm.parsers.fdb.DURABILITY, set by `durability`):

- sync-flush: FDB's default, its data fdatasync'd at every flush; fio fdatasyncs after
  each flush's worth of fields;
- sync-end: synchronous writes without data sync at flush; both sides end with a syncfs of
  the file system, and its time counts;
- async-end: FDB_ASYNC_WRITE (eckit's asynchronous writer), which syncs no data whatever
  fdbDataSyncOnFlush says; both sides end with a syncfs.

Each job first runs both sides once, small and untimed, under strace and fails unless every
data file (FDB's and fio's) had exactly one fdatasync per flush (sync-flush) or none, with
one syncfs at the end (the end variants); then repeats the pair (`repeats`) and reports
medians. Throughput is all writers' bytes over the slowest writer's time, on both sides.

Two archive paths (`path`):
- message: fdb-hammer, FDB's own benchmark: FDB decodes every GRIB message (ecCodes) to find
  its key;
- key: fdb-archive-bench (src/, the release's own: its module), which archives with the
  key it already has, fdb5::FDB::archive(key, data, length), as the IFS I/O server does.
`fdb_cpu_per_gib` is the writer processes' CPU seconds (user + sys, all threads: eckit's
asynchronous writers too) per GiB archived, start-up and each program's re-encoding of the
fields' headers included alike; the two paths' difference is what the decode costs.

MultioHammerThroughputCheck measures multio-hammer, MultIO's load generator (the IFS I/O
server library's plan: a Sink action with the FDB sink, a flush per step), exactly as
FdbThroughputCheck measures fdb-hammer: the same fields from the same template, against
fio writing the same bytes with the same durability, with the same sync audit
(iostack_rfm.jobs.multio hammer prints its statistics as fdb-hammer does). Its fdb_write_ratio
stands beside fdb-hammer's for each durability in the same session.

What a field costs, so that a site can compare its profile with another's (FdbThroughputCheck's
performance variables beside the ratios): `us_per_field` (FDB's time per field, end sync
included) and `overhead_us_per_field` (that beyond the raw write of the same bytes), medians
over the repetitions; and from an untimed profile of one writer at `profile_steps` and twice
as many steps, the difference over the extra fields: `syscalls_per_field` (strace -c; and
write, fdatasync, ... by name), `page_faults_per_field` (getrusage). Where the CPU goes, by
symbol: fdb-archive-profile --perf (the fdb-archive-bench package; README beside its source).

FdbFieldSizeCheck repeats FdbThroughputCheck for [OIFS-HECToR]'s resolutions' field sizes
(T159 ~40 KB, T511 ~400 KB, T1279 ~2 MiB, 16-bit packing on a regular grid), as many bytes
each: per-field overhead against bytes.

FdbWriterScalingCheck is [OIFS-HECToR]'s NWRTOUT experiment on one node: the same fields
archived by 1, 2, 4, ... concurrent writers (key path, each with its own (member, step)
keys) against as many concurrent fio jobs, reporting each count's ratio and the best.

FDB's tunables the variants set: FDB_ASYNC_WRITE (fdbAsyncWrite: archive through eckit's
AIOHandle) and FDB_DATA_SYNC_ON_FLUSH (fdbDataSyncOnFlush: fdatasync of the data files at
flush, which only the synchronous writer does) as environment variables; fdbBufferSize (the
synchronous FDBFileHandle's buffer), fdbSizeAsyncBuffer and fdbNbAsyncBuffers (AIOHandle's)
in eckit's resource file $FDB_HOME/etc/config/local, which the job writes (FDB 5.10.8 has
no variables for them). What each variant syncs is not taken on trust: the audit checks it
in every job.

fdb-hammer 5.10.8 quirks the workload works around: its reader asks for the template's
level whatever --nlevels says, so the template is on level 1 and nlevels is 1; and its
parameter ids 8 and up need other product templates, so nparams is at most 7. The
template is an ensemble member (type pf, stream enfo) because fdb-hammer sets `number`.
"""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (
    parameter,
    performance_function,
    run_after,
    run_before,
    sanity_function,
    variable,
)

from iostack.core import paths
from iostack_rfm.parsers import fdb
from iostack_rfm.base import IostackMixin, parsed

MiB = 1024 * 1024

# (member, step) pairs of nparams fields, 2 MiB each (0.25 degree, 16 bits); a flush each.
WORKLOADS = {
    # CI-sized nodes: 252 fields, 0.49 GiB
    'small': {'nsteps': 36, 'members': 1, 'nparams': 7},
    # cluster partitions: 504 fields, 0.97 GiB per pass (and fio's as much again)
    'large': {'nsteps': 18, 'members': 4, 'nparams': 7},
}
#: regular lat/lon grids whose 16-bit fields have the sizes of [OIFS-HECToR]'s resolutions'
#: (points, bytes): T159 20200, 40.6 KB; T511 205440, 411 KB; T1279 1038240, 2.08 MB. A
#: smaller field takes proportionally more steps, so that every size writes as many bytes.
GRIDS = {'T159': (101, 200), 'T511': (321, 640), 'T1279': (721, 1440)}
STEPS_SCALE = {'T159': 50, 'T511': 5, 'T1279': 1}
SCRIPT = paths.REFRAME_DIR / 'iostack_rfm' / 'templates' / 'fdb-throughput.sh'
LIST_REQUEST = 'class=od,expver=0001'
#: iostack_rfm.parsers.fdb.write_figures' figures and their units
FIGURES = (('fdb_write_ratio', 'ratio'), ('fdb_write_bw', 'MiB/s'), ('raw_write_bw', 'MiB/s'),
           ('fdb_write_ratio_spread', 'fraction'), ('fdb_write_bw_spread', 'fraction'))


class FdbWriteMeasurement(IostackMixin, rfm.RunOnlyRegressionTest):
    """FDB writers against as many raw writers, for each of `writer_counts`
    (templates/fdb-throughput.sh); the subclasses choose the writer and the counts."""

    size = parameter(['small', 'large'])
    durability = parameter(list(fdb.DURABILITY))
    nb_async_buffers = variable(int, value=4)
    #: raw + FDB passes per writer count; the figures are medians over them
    repeats = variable(int, value=3)
    #: steps of the untimed pass under strace that proves each side's syncs (0: none, for
    #: a site without strace)
    audit_steps = variable(int, value=2)
    #: steps of the untimed profile of one FDB writer (it runs this many and twice as many;
    #: 0: none)
    profile_steps = variable(int, value=0)
    writer_counts = variable(list, value=[1])
    #: the MARS keys every archived field has (the count of fields FDB lists)
    list_request = variable(str, value=LIST_REQUEST)
    #: the fields' grid (GRIDS)
    field = variable(str, value='T1279')
    # the site's stack only: timed once per partition (a node's own FDB, Debian's in
    # `builtin`, has the bit-identity checks; `-S valid_prog_environs=builtin` times it)
    valid_prog_environs = ['+fdb +stack']
    num_tasks = 1

    @run_after('init')
    def choose_partitions(self):
        # the small workload where the node is CI-sized, the large one everywhere else
        self.valid_systems = ['+fdb +small-io'] if self.size == 'small' else ['+fdb -small-io']

    def uses_archive_bench(self):
        return True

    @run_after('init')
    def need_the_releases_archive_bench(self):
        # the key path runs the release's fdb-archive-bench (its module), never a copy
        # built here
        if self.uses_archive_bench():
            self.require_app_features(['fdb-archive-bench'])

    @run_after('setup')
    def skip_where_there_is_no_archive_bench(self):
        # an environment chosen by name (`-S valid_prog_environs=builtin`: Debian's FDB)
        self.skip_if(self.uses_archive_bench() and 'fdb-archive-bench' not in
                     self.current_environ.features,
                     f'environment {self.current_environ.name} has no fdb-archive-bench: the '
                     'key path runs the release\'s (environment `stack`)')

    @property
    def workload(self):
        w = dict(WORKLOADS[self.size])
        w['nsteps'] *= STEPS_SCALE[self.field]
        return w

    @property
    def expected_fields(self):
        w = self.workload
        return w['nsteps'] * w['members'] * w['nparams']

    def writer_command(self):
        """One writer's command; %W, %N and %S are its index, the writer count, the steps.
        This one: the key path (fdb-archive-bench)."""
        w = self.workload
        return ['fdb-archive-bench', '--path', 'key', '--template', 'template.grib',
                '--nsteps', '%S', '--members', str(w['members']), '--nparams', str(w['nparams']),
                '--writer', '%W', '--writers', '%N']

    def readback_commands(self):
        raise NotImplementedError

    @run_before('run')
    def set_job(self):
        io = self.io_dir()
        w = self.workload
        settings = fdb.DURABILITY[self.durability]
        buffer_bytes = self.buffer_mib * MiB
        self.env_vars.update({
            'FDB5_CONFIG_FILE': '$PWD/fdb-config.yaml',
            'FDB_HOME': '$PWD/fdb-home',
            'FDB_ASYNC_WRITE': int(settings['async_write']),
            'FDB_DATA_SYNC_ON_FLUSH': int(settings['data_sync_on_flush']),
        })
        resources = (f'fdbBufferSize: {buffer_bytes}\\n'
                     f'fdbSizeAsyncBuffer: {buffer_bytes}\\n'
                     f'fdbNbAsyncBuffers: {self.nb_async_buffers}\\n')
        self.prerun_cmds = [
            'mkdir -p fdb-home/etc/config',
            f"printf '{resources}' > fdb-home/etc/config/local",
            # one ensemble-member field on level 1 as the writers' template
            f'python3 -m iostack_rfm.jobs.gribgen first.grib 1 1 {GRIDS[self.field][0]} '
            f'{GRIDS[self.field][1]} --count 1',
            'grib_set -s productDefinitionTemplateNumber=1,type=pf,stream=enfo,number=1,level=1'
            ' first.grib template.grib',
        ]
        self.executable = 'bash'
        self.executable_opts = [
            str(SCRIPT), io, self.durability, str(self.repeats),
            f"'{' '.join(map(str, self.writer_counts))}'", str(w['nsteps']), str(w['members']),
            str(w['nparams']), '$(stat -c %s template.grib)', str(self.audit_steps),
            str(self.profile_steps), '--',
            *self.writer_command()]
        self.postrun_cmds = [
            f'echo "fields listed=$(fdb-list --porcelain {self.list_request} | grep -c \'^{{\')"',
            *self.readback_commands(),
            f'rm -rf {io}/fdb-root',
        ]
        if io != self.stagedir:
            self.postrun_cmds.append(f'rmdir {io} 2>/dev/null || true')

    # the measurement's files

    def _writer_outs(self, n, r, ext='out'):
        return [f'fdb-{n}-{r}-{w}.{ext}' for w in range(n)]

    def _sync_times(self, side, n):
        if not fdb.DURABILITY[self.durability]['end_sync']:
            return []
        return [f'{side}-{n}-{r}-sync.time' for r in range(1, self.repeats + 1)]

    def figures(self, n):
        """The medians of iostack_rfm.parsers.fdb.write_figures for `n` writers."""
        reps = range(1, self.repeats + 1)
        return parsed(fdb.write_figures, [f'raw-{n}-{r}.json' for r in reps],
                      [self._writer_outs(n, r) for r in reps],
                      self._sync_times('raw', n), self._sync_times('fdb', n))

    def per_field(self, n):
        """iostack_rfm.parsers.fdb.seconds_per_field for `n` writers."""
        reps = range(1, self.repeats + 1)
        return parsed(fdb.seconds_per_field, [f'raw-{n}-{r}.json' for r in reps],
                      [self._writer_outs(n, r) for r in reps],
                      self._sync_times('raw', n), self._sync_times('fdb', n))

    def profile(self):
        """iostack_rfm.parsers.fdb.profile_figures of the untimed profile."""
        small, big = self.profile_steps, 2 * self.profile_steps
        return parsed(fdb.profile_figures,
                      f'profile-{small}-syscalls.out', f'profile-{small}.strace',
                      f'profile-{big}-syscalls.out', f'profile-{big}.strace',
                      f'profile-{small}-rusage.out', f'profile-{small}.rusage',
                      f'profile-{big}-rusage.out', f'profile-{big}.rusage')

    def cpu_per_gib(self, n):
        reps = range(1, self.repeats + 1)
        return parsed(fdb.median_cpu_per_gib, [self._writer_outs(n, r) for r in reps],
                      [self._writer_outs(n, r, 'time') for r in reps])

    def _audit_problems(self):
        n = self.writer_counts[-1]
        members = self.workload['members']
        units = members * self.audit_steps
        flushes = [len(range(w, units, n)) for w in range(n)]
        end = fdb.DURABILITY[self.durability]['end_sync']
        return parsed(fdb.sync_problems, ['audit-raw.strace'],
                      [f'audit-fdb-{w}.strace' for w in range(n)],
                      *(['audit-raw-sync.strace', 'audit-fdb-sync.strace'] if end else []),
                      durability=self.durability, flushes=flushes)

    def measurement_ok(self):
        counts, r = self.writer_counts, self.repeats
        passes = [(n, i) for i in range(1, r + 1) for n in counts]
        checks = [
            sn.assert_eq(sn.count(sn.findall(r'^fio writers=\d+ rc=0$', self.stdout)),
                         len(passes) + bool(self.audit_steps)),
            sn.assert_eq(sn.count(sn.findall(r'^fdb writer=\d+ writers=\d+ rc=0$', self.stdout)),
                         r * sum(counts) + (counts[-1] if self.audit_steps else 0)
                         + (4 if self.profile_steps else 0)),
            # every field listed after the last pass
            sn.assert_eq(sn.extractsingle(r'fields listed=(\d+)', self.stdout, 1, int),
                         self.expected_fields),
        ]
        for n, i in passes:
            checks += [
                sn.assert_eq(sn.sum(parsed(fdb.hammer_stats, self._writer_outs(n, i),
                                           name='Fields written')), self.expected_fields),
                # fio job W wrote as many bytes as FDB writer W archived
                sn.assert_eq(parsed(fdb.written_bytes_problems, f'raw-{n}-{i}.json',
                                    self._writer_outs(n, i)), [], msg='{0}'),
            ]
        if self.profile_steps:
            checks.append(sn.assert_found(r'^profile done', self.stdout))
        if self.audit_steps:
            checks += [sn.assert_found(r'^sync audit done', self.stdout),
                       sn.assert_eq(self._audit_problems(), [], msg='sync audit: {0}')]
        return sn.all(checks)


@rfm.simple_test
class FdbThroughputCheck(FdbWriteMeasurement):
    descr = ('FDB archive throughput / raw write of the same bytes with the same durability '
             '([OIFS-HECToR])')
    #: message: fdb-hammer (FDB decodes each message); key: fdb-archive-bench with the key
    path = parameter(['message', 'key'])
    #: fdbBufferSize (synchronous) or fdbSizeAsyncBuffer (async), MiB; 64 is the default
    buffer_mib = parameter([64, 4])
    profile_steps = 2

    def uses_archive_bench(self):
        return self.path == 'key'

    @run_after('init')
    def set_tags(self):
        self.tags = {'fdb', 'performance', 'weekly'}
        # nightly: every durability on FDB's own benchmark, the key path at FDB's default
        if self.buffer_mib == 64 and (self.path == 'message' or self.durability == 'sync-flush'):
            self.tags.add('nightly')

    @run_after('init')
    def set_perf_variables(self):
        figures = self.figures(1)
        for var, unit in FIGURES:
            self.perf_variables[var] = sn.make_performance_function(figures[var], unit)
        self.perf_variables['fdb_cpu_per_gib'] = sn.make_performance_function(
            self.cpu_per_gib(1), 's/GiB')
        per_field = self.per_field(1)
        for var in ('us_per_field', 'overhead_us_per_field'):
            self.perf_variables[var] = sn.make_performance_function(per_field[var], 'us')
        if self.profile_steps:
            profile = self.profile()
            for var in ('syscalls_per_field', 'page_faults_per_field', 'write_per_field',
                        'fdatasync_per_field'):
                self.perf_variables[var] = sn.make_performance_function(profile[var], 'count')
        if self.path == 'message':
            self.perf_variables['fdb_read_bw'] = sn.make_performance_function(
                sn.extractsingle(r'^Total rate:\s*(\S+) MB / s', 'hammer-read.out', 1, float),
                'MiB/s')

    def _hammer_args(self):
        w = self.workload
        return [f'--nensembles={w["members"]}', f'--nparams={w["nparams"]}', '--nlevels=1',
                '--number=1', '--expver=0001', '--class=od']

    def writer_command(self):
        if self.path == 'message':
            return ['fdb-hammer', '--statistics', '--nsteps=%S', *self._hammer_args(),
                    'template.grib']
        return super().writer_command()

    def readback_commands(self):
        w = self.workload
        if self.path == 'message':
            return [f'fdb-hammer --read --statistics --nsteps={w["nsteps"]} '
                    f'{" ".join(self._hammer_args())} template.grib > hammer-read.out',
                    'echo "read rc=$?"']
        return [f'fdb-archive-bench --verify --template template.grib '
                f'--nsteps {w["nsteps"]} --members {w["members"]} --nparams {w["nparams"]} '
                '> verify.out', 'echo "read rc=$?"']

    @sanity_function
    def validate(self):
        n = self.expected_fields
        if self.path == 'message':
            # every field read back in full
            read = [sn.assert_eq(sn.extractsingle(r'^Fields read:\s*(\d+)', 'hammer-read.out',
                                                  1, int), n),
                    sn.assert_eq(sn.extractsingle(r'^Bytes read:\s*(\S+)', 'hammer-read.out', 1,
                                                  float),
                                 sn.sum(parsed(fdb.hammer_stats,
                                               self._writer_outs(1, self.repeats),
                                               name='Bytes written')))]
        else:
            # every field read back byte for byte, under the key decoding would give it
            read = [sn.assert_eq(sn.extractsingle(rf'^{k}:\s*(\d+)', 'verify.out', 1, int), v)
                    for k, v in (('Fields verified', n), ('Verify mismatches', 0),
                                 ('Key mismatches', 0))]
        return sn.all([self.measurement_ok(), sn.assert_found(r'^read rc=0$', self.stdout),
                       *read])


@rfm.simple_test
class FdbFieldSizeCheck(FdbThroughputCheck):
    descr = ('FDB archive overhead per field and FDB/raw against field size (T159, T511, T1279 '
             'fields of [OIFS-HECToR])')
    resolution = parameter(list(GRIDS))
    durability = parameter(['sync-flush', 'sync-end'])
    buffer_mib = parameter([64])

    @run_after('init')
    def set_tags(self):
        self.tags = {'fdb', 'performance', 'weekly'}
        self.field = self.resolution


@rfm.simple_test
class FdbWriterScalingCheck(FdbWriteMeasurement):
    descr = ('FDB aggregate archive throughput with 1, 2, 4, ... concurrent writers / as many '
             'raw writers ([OIFS-HECToR] NWRTOUT)')
    durability = parameter(['sync-flush', 'async-end'])
    #: at most this many writers (default: the partition's CPUs, else 2)
    max_writers = variable(int, type(None), value=None)
    buffer_mib = variable(int, value=64)

    @run_after('init')
    def set_tags(self):
        self.tags = {'fdb', 'performance', 'weekly'}
        if self.durability == 'sync-flush':
            self.tags.add('nightly')

    @run_after('setup')
    def choose_writer_counts(self):
        limit = self.max_writers or self.current_partition.processor.num_cpus or 2
        # every writer needs a (member, step) pair of its own
        w = self.workload
        limit = min(limit, w['nsteps'] * w['members'])
        counts = [2 ** k for k in range(limit.bit_length()) if 2 ** k <= limit]
        self.writer_counts = counts + ([limit] if counts[-1] != limit else [])
        # the writers are processes of the job's one task
        self.num_cpus_per_task = self.writer_counts[-1]
        self.audit_steps = self.audit_steps and max(self.audit_steps, self.writer_counts[-1])
        for n in self.writer_counts:
            figures = self.figures(n)
            for var, unit in FIGURES:
                self.perf_variables[f'{var}_writers_{n}'] = sn.make_performance_function(
                    figures[var], unit)

    def _best(self):
        return _best_writers(self.writer_counts, *(self.figures(n)['fdb_write_ratio']
                                                   for n in self.writer_counts))

    @performance_function('writers')
    def best_writers(self):
        return self._best()[0]

    @performance_function('ratio')
    def best_ratio(self):
        return self._best()[1]

    def readback_commands(self):
        return []

    @sanity_function
    def validate(self):
        return self.measurement_ok()


@sn.deferrable
def _best_writers(counts, *ratios):
    return fdb.best_writers(list(counts), list(ratios))


@rfm.simple_test
class MultioHammerThroughputCheck(FdbWriteMeasurement):
    descr = ("multio-hammer's archive throughput into FDB / raw write of the same bytes with "
             "the same durability (beside FdbThroughputCheck's fdb-hammer)")
    app_features = ['multio']
    buffer_mib = variable(int, value=64)
    #: multio-hammer writes class rd, expver xxxx whatever the template says
    list_request = 'class=rd,expver=xxxx'

    @run_after('init')
    def set_tags(self):
        self.tags = {'fdb', 'multio', 'performance', 'weekly'}
        if self.durability == 'sync-flush':
            self.tags.add('nightly')

    @run_after('init')
    def set_perf_variables(self):
        figures = self.figures(1)
        for var, unit in FIGURES:
            self.perf_variables[var] = sn.make_performance_function(figures[var], unit)
        self.perf_variables['fdb_cpu_per_gib'] = sn.make_performance_function(
            self.cpu_per_gib(1), 's/GiB')

    def writer_command(self):
        w = self.workload
        return ['python3', '-m', 'iostack_rfm.jobs.multio', 'hammer', '--config',
                '$PWD/multio-hammer.yaml', '--template', 'template.grib', '--nsteps', '%S',
                '--members', str(w['members']), '--fdb-root', f'{self.io_dir()}/fdb-root']

    @run_before('run')
    def write_hammer_config(self):
        self.prerun_cmds.append('python3 -m iostack_rfm.jobs.multio hammer-config '
                                f'multio-hammer.yaml --params {self.workload["nparams"]}')

    def readback_commands(self):
        return []

    @sanity_function
    def validate(self):
        return self.measurement_ok()
