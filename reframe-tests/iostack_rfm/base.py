"""The one mixin of iostack's checks, and the one way they read a file of their job.

`IostackMixin` carries what every check needs from the site, the way EESSI's mixin does:

- references: `reference` from references/<check module>.yaml (iostack.regression.references),
  those of the partition and environment the case runs in; one without a baseline gets one
  no value meets, and a warning says how to record it;
- applications: `app_features` select environments that have them (`+openfoam`) and load
  the modules their `extras['app_modules']` name (none where the application is on PATH);
- resources: `io_dir()` / `shared_io_dir()` (the partition's `extras['io_dir']`), and with
  `one_rank_per_core` one MPI rank per core on `self.nodes` whole nodes;
- launch: the partition's `extras['launcher_options']` ([OCI-OpenFOAM]'s binding) on every launch;
  in a check made of steps (`steps_job`, see AppCheck) the job's own line runs on the batch
  host and MPI programs are steps started by `mpi_command()`;
- job-side tools: PYTHONPATH, so jobs run `python3 -m iostack.deployment.fdbconfig`,
  `python3 -m iostack_rfm.jobs.gribcompare`, ... (standard library only);
- drained nodes: a check tagged `performance` stays off the nodes the nightly's health gate
  drained (IOSTACK_DRAINED_NODES: `--exclude`);
- timing: a check tagged `performance` gets its node to itself: ReFrame's exclusive access
  on batch systems, and the host slot where jobs share a host (iostack_rfm.parsers.slots); on a
  site that caps the CPU frequency it asks for the one its references were taken at (their
  provenance's `cpu_freq_khz`, else the partition's `extras['cpu_freq_khz']`), and fails
  when it ran at another; every job records the frequency it ran at (`cpu_freq_requested`,
  `cpu_freq_max_khz`: stored with its result);
- a full disk: a tool that may block on one runs `bounded()`, and the sanity phase fails,
  naming the file system, when one the check wrote to is full.

`parsed(reader, *paths, **options)` calls a reader of iostack_rfm (text in, value out) on
files of the job, in the sanity or performance phase.

    @rfm.simple_test
    class MyAppCheck(AppCheck):
        app_features = ['openfoam']                  # environments need +openfoam
        @run_before('run')
        def set_job(self):
            self.prerun_cmds = [self.step('mesh', 'blockMesh > log.blockMesh 2>&1'),
                                self.step('solve', f'{self.mpi_command()} simpleFoam -parallel')]
        @sanity_function
        def validate(self):
            return sn.all([self.steps_ok(['mesh', 'solve']),
                           sn.assert_le(parsed(openfoam.converged_at, 'log.simpleFoam'), 500)])
"""
import inspect
import os
import re
import statistics

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import PerformanceError, SanityError
from reframe.core.logging import getlogger

from iostack.core import filesystems, paths
from iostack.regression import node as node_id
from iostack.regression import references
from iostack_rfm import context
from iostack_rfm.parsers import slots, steps

# Open MPI refuses to start as root unless told twice; CI containers run as root.
OPENMPI_AS_ROOT = {'OMPI_ALLOW_RUN_AS_ROOT': '1', 'OMPI_ALLOW_RUN_AS_ROOT_CONFIRM': '1'}
#: what strerror(ENOSPC) prints in a job's output
ENOSPC_TEXT = 'No space left on device'
#: what a job prints when `bounded()` killed one of its tools
STOPPED = 'iostack-stopped:'


#: where each job records the CPU frequency it ran at (its stage directory): what srun's steps
#: were asked for (SLURM_CPU_FREQ_REQ, which a site's modules and srun's --cpu-freq set) and the
#: node's cap (cpufreq's scaling_max_freq; 0 where the node does not say)
CPU_FREQ_FILE = 'iostack-cpufreq.txt'
#: and, on a second line, its governor and current frequency (scaling_governor,
#: scaling_cur_freq; `absent 0` where the node has no cpufreq, as on a VM)
_CPUFREQ = '/sys/devices/system/cpu/cpu0/cpufreq'
RECORD_CPU_FREQ = ('echo "${SLURM_CPU_FREQ_REQ:-} $(cat ' + _CPUFREQ + '/'
                   f'scaling_max_freq 2>/dev/null || echo 0)" > {CPU_FREQ_FILE}; '
                   'echo "$(cat ' + _CPUFREQ + '/scaling_governor 2>/dev/null || echo absent) '
                   '$(cat ' + _CPUFREQ + f'/scaling_cur_freq 2>/dev/null || echo 0)" >> {CPU_FREQ_FILE}')


_STOPPED_LINE = re.compile(rf'^{STOPPED} (\S+) after (\d+) s; df: (\S+) +\d+ +\d+ +(\d+) +\S+ +(.+)$',
                           re.MULTILINE)


def full_disk_problem(job_output: str, where: str) -> str | None:
    """Why a job's output says it ran out of space or had a tool stopped, or None: a tool
    killed by `bounded()` (naming the file system when it was full), or a line with
    strerror(ENOSPC)."""
    stopped = _STOPPED_LINE.findall(job_output)
    for tool, seconds, source, free_kib, mountpoint in stopped:
        if int(free_kib) << 10 < filesystems.FULL_BELOW:
            return (f'file system {mountpoint} ({source}) on {where} is full: {free_kib} KiB '
                    f'free when {tool} was stopped after {seconds} s; free space there and '
                    'run again')
    enospc = next((line.strip() for line in job_output.splitlines() if ENOSPC_TEXT in line), None)
    if enospc:
        return f'the job ran out of space (ENOSPC) on {where}: {enospc}'
    if stopped:
        tool, seconds = stopped[0][:2]
        return f'{tool} was stopped after {seconds} s (tool_timeout)'
    return None


@sn.deferrable
def parsed(reader, *paths, **options):
    """`reader(text, ..., **options)` on the text of each file named (a list of paths gives
    a list of texts), evaluated in the sanity or performance phase in the stage directory.
    A reader's ValueError or KeyError fails the phase, naming the files."""
    def text(path):
        path = sn.evaluate(path)
        if isinstance(path, (list, tuple)):
            return [text(p) for p in path]
        with open(path) as f:
            return f.read()

    try:
        return reader(*(text(p) for p in paths), **options)
    except (ValueError, KeyError) as e:
        names = ', '.join(str(sn.evaluate(p)) for p in paths)
        raise SanityError(f'{names}: {getattr(reader, "__name__", "reader")}: {e}') from e


@sn.deferrable
def median(*values):
    """The median of a figure's repeats within a run: what a gated figure is."""
    return statistics.median(values)


@sn.deferrable
def spread(*values):
    """(max - min) / median of a figure's repeats, reported beside it as
    `<figure>_spread` (record-baseline makes a band from it, iostack.regression.gates)."""
    return (max(values) - min(values)) / statistics.median(values)


class IostackMixin(rfm.RegressionTestPlugin):
    """Recorded references, application environments, I/O directories, resources and launch
    for every iostack check (see the module's docstring)."""

    # ReFrame's own variables that the mixin reads and sets, typed for the type checker
    # (ReFrame has no type information); annotations only, nothing ReFrame sees
    maintainers: list[str]
    valid_prog_environs: list[str]
    prerun_cmds: list[str]

    #: the test's parameters as the references file keys them (stored in the report, so
    #: record-baseline files each value under the variant that produced it)
    reference_variant = variable(str, value=references.ANY_VARIANT)
    #: environment features naming the applications the check runs
    app_features = variable(typ.List[str], value=[])
    #: one MPI rank per core on `self.nodes` whole nodes (checks with a `nodes` parameter)
    one_rank_per_core = variable(bool, value=False)
    #: the job is named steps (`step()`): its own line runs on the batch host, MPI programs
    #: are steps started by `mpi_command()`
    steps_job = variable(bool, value=False)
    #: seconds a tool run through `bounded()` may take: eckit's FileHandle::write retries a
    #: write that failed with ENOSPC every 60 s, forever (eckit 1.20 to 1.28), so an FDB
    #: tool on a full file system would hold its job until the job's time limit
    tool_timeout = variable(int, value=600)
    #: a short, small job (a few minutes on a node or two): it runs with the partition's
    #: `extras['short_access']`, the QoS or partition a site has for such runs
    short_job = variable(bool, value=False)
    #: the CPU frequency the job's srun steps were asked to run at (SLURM_CPU_FREQ_REQ in the
    #: job: kHz, or a governor; '' is the site's default), stored with every result
    cpu_freq_requested = variable(str, value='')
    #: the node's CPU frequency cap (kHz) when the job started; 0 where the node does not say
    cpu_freq_max_khz = variable(int, value=0)
    #: the node's cpufreq governor and current frequency (kHz) when the job started, shown in
    #: the report and never gated ('absent', 0: the node has no cpufreq, as on a VM)
    cpu_governor = variable(str, value='')
    cpu_freq_cur_khz = variable(int, value=0)
    #: the node its figures are judged as (iostack.regression.node: a declared node class or
    #: the node's own identity) and that identity, stored with every result: record-baseline
    #: keys what it records by it
    node_key = variable(str, value='')
    node_identity = variable(typ.Dict[str, str], value={})

    @run_after('init')
    def set_maintainers(self):
        self.maintainers = self.maintainers or ['iostack']

    # references

    def _references_section(self):
        path = references.references_file(inspect.getfile(type(self)),
                                          context.settings().references)
        return path, references.load(path).get(type(self).__name__)

    @run_after('init')
    def name_reference_variant(self):
        params = {name: getattr(self, name) for name in type(self).param_space.params}
        self.reference_variant = references.variant_key(params)

    @run_after('setup')
    def load_recorded_references(self):
        # after setup: a value is recorded for the environment it was measured in, and on
        # the node (its scratch disk is part of its identity: io_dir, else the stage's)
        self.node_key, self.node_identity = node_id.this_node(
            self.io_dir(), self.current_partition.extras.get('node_class'),
            context.node_override())
        _, section = self._references_section()
        if section is not None:
            self.reference = references.reference_dict(section, self.reference_variant,
                                                       self.current_environ.name, self.node_key)

    def reference_cpu_freq(self):
        """The CPU frequency (kHz) this case's recorded references were taken at (their
        provenance), or None."""
        _, section = self._references_section()
        if section is None:
            return None
        found = references.entries(section, self.current_partition.fullname,
                                   self.reference_variant, self.current_environ.name,
                                   self.node_key or None)
        freqs = [int(f) for e in found.values()
                 if (f := (e.get('provenance') or {}).get('cpu_freq_khz')) is not None]
        return max(freqs) if freqs else None

    @run_before('run')
    def ask_for_the_reference_cpu_frequency(self):
        """A performance check runs at the frequency its references were taken at, else at
        the one the site's performance checks use; a variable of the job's environment,
        set after its modules load, so every srun of the job gets it [ARCHER2-Energy]."""
        if 'performance' not in self.tags:
            return
        freq = self.reference_cpu_freq() or self.current_partition.extras.get('cpu_freq_khz')
        if freq:
            self.env_vars['SLURM_CPU_FREQ_REQ'] = str(freq)

    @run_before('run', always_last=True)
    def record_the_cpu_frequency(self):
        if RECORD_CPU_FREQ not in self.prerun_cmds:
            self.prerun_cmds = [RECORD_CPU_FREQ, *self.prerun_cmds]

    @run_before('sanity')
    def read_the_cpu_frequency(self):
        try:
            with open(os.path.join(self.stagedir, CPU_FREQ_FILE)) as f:
                first, _, policy = f.read().strip('\n').partition('\n')
        except OSError:
            return
        requested, _, cap = first.rpartition(' ')
        self.cpu_freq_requested = requested.strip()
        self.cpu_freq_max_khz = int(cap) if cap.isdigit() else 0
        governor, _, current = policy.strip().partition(' ')
        self.cpu_governor = governor or 'absent'
        self.cpu_freq_cur_khz = int(current) if current.isdigit() else 0

    @run_before('performance')
    def check_the_cpu_frequency_of_the_references(self):
        ref = self.reference_cpu_freq()
        if ref and self.cpu_freq_requested != str(ref):
            raise PerformanceError(
                f'the references of {self.current_partition.fullname} were taken at {ref} '
                f'kHz (their provenance), this run asked for '
                f'{self.cpu_freq_requested or "the site default"}: not comparable')

    @run_before('performance')
    def explain_missing_baseline(self):
        path, section = self._references_section()
        partition = self.current_partition.fullname
        environ = self.current_environ.name
        if section is None or references.has_baseline(section, partition,
                                                      self.reference_variant, environ,
                                                      self.node_key or None):
            return
        site = context.site_of(self.current_partition)
        if references.recorded_anywhere(section, partition, environ):
            getlogger().warning(
                f'{self.display_name}: node {self.node_key} has no baseline of its own in '
                f'{path.name}: only its figures that transfer between nodes are judged; '
                f'`bin/iostack record-baseline --site {site} --system '
                f'{self.current_system.name} --check {type(self).__name__}` records its own')
            return
        getlogger().warning(
            f'{self.display_name}: no baseline for {partition}+{environ} in {path.name}, so its '
            f'reference cannot be met and the check fails until one is recorded: run the '
            f'nightly, then `bin/iostack record-baseline --site {site} --system '
            f'{self.current_system.name} --check {type(self).__name__}` and commit '
            f'reframe-tests/references/{path.name}')

    # applications

    @run_after('init')
    def select_app_environments(self):
        self.require_app_features(self.app_features)

    def require_app_features(self, features):
        """Add application features: environments must have them, their modules load."""
        wanted = ' '.join(f'+{f}' for f in features)
        if not wanted:
            return

        def with_features(spec):
            if spec == '*':
                return wanted
            if spec[0] in '+-%':
                return ' '.join([spec] + [f'+{f}' for f in features if f'+{f}' not in
                                          spec.split()])
            return spec     # an environment by name (fixtures get their parent's)

        self.valid_prog_environs = [with_features(e) for e in self.valid_prog_environs]
        self.app_features = self.app_features + [f for f in features
                                                 if f not in self.app_features]

    @run_after('setup')
    def load_app_modules(self):
        by_feature = self.current_environ.extras.get('app_modules', {})
        for feature in self.app_features:
            for module in by_feature.get(feature, []):
                if module not in self.modules:
                    self.modules.append(module)

    # resources

    def io_dir(self) -> str:
        """Where an I/O check writes: the partition's `extras['io_dir']` (a file system the
        site cares about, e.g. Lustre or NVMe), in a directory of the test's own, else its
        stage directory."""
        base = self.current_partition.extras.get('io_dir')
        if not base:
            return self.stagedir
        return os.path.join(base, f'{self.current_system.name}-{self.short_name}')

    def shared_io_dir(self) -> str:
        """Where a benchmark whose ranks on different nodes share files writes: io_dir(),
        unless that is node-local (feature `nvme`), then the stage directory (on the file
        system ReFrame's prefix is on, shared by the nodes)."""
        if 'nvme' in self.current_partition.features:
            return self.stagedir
        return self.io_dir()

    @run_after('setup')
    def use_whole_nodes(self):
        if self.one_rank_per_core:
            self.num_tasks_per_node = self.current_partition.processor.num_cpus or 1
            self.num_tasks = self.nodes * self.num_tasks_per_node

    # launch

    @run_after('setup')
    def set_launchers(self):
        if not self.steps_job:
            return
        name = self.current_partition.extras.get('mpi_launcher')
        self._mpi_launcher = getlauncher(name)() if name else self.job.launcher
        if self._mpi_launcher.registered_name in ('mpirun', 'mpiexec'):
            self.env_vars.update(OPENMPI_AS_ROOT)
        self.job.launcher = getlauncher('local')()

    @run_before('run')
    def add_partition_launcher_options(self):
        if self.steps_job or self.job is None:
            return      # mpi_command() adds them to each MPI step; builds launch nothing
        options = self.current_partition.extras.get('launcher_options', [])
        self.job.launcher.options += [o for o in options if o not in self.job.launcher.options]

    @run_before('run')
    def ask_for_the_short_queue(self):
        short = self.current_partition.extras.get('short_access', [])
        if self.short_job and self.job is not None:
            self.job.options += [o for o in short if o not in self.job.options]

    @run_before('run')
    def keep_off_drained_nodes(self):
        """A performance check stays off the nodes the nightly's health gate drained (their
        disk, huge pages, NPS/SMT or RDMA link are not as their facts say:
        iostack.regression.nightly); the other checks still run on them."""
        drained = context.drained_nodes()
        if ('performance' in self.tags and drained and self.job is not None
                and self.current_partition.scheduler.registered_name in ('slurm', 'squeue')):
            self.job.options += [f'--exclude={drained}']

    @run_before('run', always_last=True)
    def take_the_host_when_timed(self):
        if 'performance' in self.tags:
            self.exclusive_access = True
            if slots.TAKE_HOST not in self.prerun_cmds:
                self.prerun_cmds = [slots.TAKE_HOST, *self.prerun_cmds]

    def mpi_command(self, *extra):
        """The launch command for the job's ranks, for a step that starts an MPI program:
        the partition's launcher (or its `extras['mpi_launcher']` where its own starts no
        ranks, like the local scheduler's) with its `extras['launcher_options']` and
        `extras['mpi_launcher_options']` (PMI selection)."""
        extras = self.current_partition.extras
        options = extras.get('launcher_options', []) + extras.get('mpi_launcher_options', [])
        # ReFrame copies these to the job only when the run stage starts
        self.job.num_tasks = self.num_tasks
        self.job.num_tasks_per_node = self.num_tasks_per_node
        self.job.num_cpus_per_task = self.num_cpus_per_task
        return ' '.join([self._mpi_launcher.run_command(self.job), *options, *extra]).strip()

    @run_before('run')
    def set_job_pythonpath(self):
        self.env_vars['PYTHONPATH'] = f'{paths.job_pythonpath()}:$PYTHONPATH'

    # a full disk

    def bounded(self, command, name=None):
        """`command`, killed after `tool_timeout` seconds; then the job's output says so
        (naming it `name`, default its program), with the free space of the job's directory
        at that moment. SIGKILL, not SIGTERM: a terminated FDB tool removes what it wrote,
        and with it the sign of a full disk."""
        tool = name or command.split()[0]
        return (f'timeout -s KILL {self.tool_timeout} {command}; rc=$?; if [ $rc = 137 ]; '
                f'then echo "{STOPPED} {tool} after {self.tool_timeout} s; df: '
                '$(df -Pk . | tail -n 1)"; fi; (exit $rc)')

    @run_before('sanity')
    def fail_on_a_full_file_system(self):
        """A check that ran out of space fails for that reason, naming the file system,
        whatever failed downstream of the ENOSPC (an empty file, a missing line)."""
        if self.is_dry_run():
            return
        for path in dict.fromkeys([self.stagedir, self.io_dir()]):
            full = os.path.isdir(path) and filesystems.full(path)
            if full:
                raise SanityError(f'{full}: free space there and run again')
        jobs = [job for job in (self.build_job, self.job) if job is not None]
        for name in [name for job in jobs for name in (job.stdout, job.stderr)]:
            try:
                with open(os.path.join(self.stagedir, name), errors='replace') as f:
                    text = f.read()
            except OSError:
                continue
            problem = full_disk_problem(text, self.current_partition.fullname)
            if problem:
                raise SanityError(problem)

    # steps (iostack_rfm.parsers.steps)

    def step(self, name, command):
        return steps.timed(name, command)

    def steps_ok(self, expected):
        """Sanity: every step ran and exited with 0."""
        return sn.assert_eq(parsed(steps.failed, self.stdout, expected=list(expected)), [],
                            msg='{0}')

    def step_seconds(self, name):
        return parsed(steps.seconds, self.stdout, name=name)


class AppCheck(IostackMixin, rfm.RunOnlyRegressionTest):
    """Base of the application and benchmark checks: a job of named steps, in any
    environment with the check's application features."""

    valid_prog_environs = ['*']
    steps_job = True
