"""[OCI-OpenFOAM] on a cluster of CI size (the `local-cluster` system: partitions with node-local
NVMe, feature `small-io`): its seven NVMe staging steps through nvme-stage and ssh, and the
inter-node scaling of the solver, each in one Slurm job over whole nodes.

MotorBikeStagingCheck, OpenFOAM's motorBike tutorial (HPC_Motorbike's small sibling),
meshed on shared storage at a coarser level than the tutorial's, then run twice with the
same ranks on the same nodes: entirely on shared storage (the reference), and through the
seven steps (1 stage-in to the head node's NVMe, 2 decomposePar there, 3 fan-out of the
case and each node's own processor dirs over ssh, 4 potentialFoam, 5 simpleFoam on NVMe
across the nodes, 6 collect each node's processor dirs, 7 stage-out without them). After
each step every node concerned prints what it holds (iostack_rfm.jobs.nodestate: files, bytes,
sha256 by processor dir). Sanity: each step moved exactly those bytes, each node holds
only its own ranks' processor dirs, and the staged-out result equals the shared-storage
run field for field (bit-identical). Performance: each step's time, the seven-step total
against the shared run's ([OCI-OpenFOAM]: -26.2 %, references/openfoam_cluster.yaml).

PitzDailyInterNodeCheck: pitzDaily to convergence on 1, 2, ... nodes of the job, as many
ranks per node as the partition has CPUs, srun with PMIx across the nodes' network. Sanity:
every run meets the case's residual controls, at an iteration count and with final
residuals close to the one-node run's. Performance: ClockTime by node count.
"""
import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import performance_function, run_after, run_before, sanity_function, variable

from iostack.core import paths
from iostack_rfm.jobs import nodestate, openfoam
from iostack_rfm.base import AppCheck, parsed
from iostack_rfm.jobs.openfoam import decompose_par_dict, foam_set, in_case, tutorial_case

SEVEN_STEPS = ('stage-in', 'decompose', 'fan-out', 'potential', 'solve', 'collect',
               'stage-out')
SHARED_STEPS = ('shared-decompose', 'shared-potential', 'shared-solve')
NVME_STAGE = paths.SRC / 'nvme-stage'


def residuals_apart(text, reference_text, residuals_rtol, iterations_rtol):
    """How a converged run's log differs from the reference run's beyond the tolerances:
    its iteration count, and each field's last initial residual."""
    log, reference = openfoam.parse(text), openfoam.parse(reference_text)
    if log.converged_at is None or reference.converged_at is None:
        raise ValueError('a run did not converge')
    out = []
    if abs(log.converged_at - reference.converged_at) > iterations_rtol * reference.converged_at:
        out.append(f'converged at {log.converged_at}, against {reference.converged_at}')
    for field, ref in sorted(reference.residuals.items()):
        mine = log.residuals.get(field)
        if mine is None or abs(mine.initial - ref.initial) > residuals_rtol * ref.initial:
            out.append(f'{field} residual {mine.initial if mine else "none"} against '
                       f'{ref.initial}')
    return out


class ClusterJob(AppCheck):
    """OpenFOAM over `nodes` whole nodes; skipped where the partition has fewer."""

    nodes = variable(int, value=3)
    valid_systems = ['+mpi +nvme +small-io']
    app_features = ['openfoam']
    one_rank_per_core = True

    @run_after('setup')
    def skip_small_partitions(self):
        scheduler = self.job.scheduler
        available = scheduler.filternodes(self.job, scheduler.allnodes())
        self.skip_if(len(available) < self.nodes,
                     f'{self.current_partition.fullname} has {len(available)} node(s), '
                     f'the check needs {self.nodes}')

    @run_before('run')
    def find_nvme_stage(self):
        # Debian's stack has no nvme-stage: the repository's own script then
        if 'nvme-stage' not in self.current_environ.features:
            self.env_vars['PATH'] = f'{NVME_STAGE}:$PATH'

    def on_each_node(self, command):
        return f'srun -N {self.nodes} -n {self.nodes} --ntasks-per-node=1 {command}'

    def in_parallel(self, case, application, *args):
        return in_case(case, application, *args, mpi_command=self.mpi_command())

    def keep_logs(self, *logs):
        """Keep these logs in the output directory, each under a name of its own (ReFrame
        keeps files by their base name, and every case has a log.simpleFoam)."""
        names = [log.replace('/', '.') for log in logs]
        self.postrun_cmds += [f'cp {log} {name} 2>/dev/null || true'
                              for log, name in zip(logs, names, strict=True)]
        self.keep_files += names


@rfm.simple_test
class MotorBikeStagingCheck(ClusterJob):
    descr = "[OCI-OpenFOAM]'s seven NVMe staging steps with nvme-stage on 3 nodes: motorBike"
    tutorial = variable(str, value='incompressible/simpleFoam/motorBike')
    #: snappyHexMesh's surface refinement level (the tutorial's 6: millions of cells); 4
    #: gives about 32,000 cells, 3 about 2,000
    surface_level = variable(int, value=4)
    #: blockMesh's background cells (the tutorial's 20 8 8)
    background_cells = variable(typ.List[int], value=[20, 8, 8])
    end_time = variable(int, value=100)
    #: [OCI-OpenFOAM]'s storage test wrote every 10 iterations
    write_interval = variable(int, value=10)
    time_limit = '1h'
    tags = {'openfoam', 'nvme', 'io', 'cluster', 'nightly'}

    def state(self, label, case, everywhere=False):
        command = f'python3 -m iostack_rfm.jobs.nodestate tree {case} --label {label}'
        return self.step(f'state-{label}', self.on_each_node(command) if everywhere else command)

    @run_before('run')
    def set_job(self):
        shared = f'{self.stagedir}/case'
        reference = f'{self.stagedir}/shared-run'
        local = self.io_dir()
        level = self.surface_level
        snappy = f'{shared}/system/snappyHexMeshDict'
        cells = ' '.join(map(str, self.background_cells))
        self.prerun_cmds = [
            self.step('layout', 'python3 -m iostack_rfm.jobs.nodestate layout'),
            self.step('prepare', ' && '.join([
                f'cp -r "$FOAM_TUTORIALS/{self.tutorial}" {shared}',
                f'gunzip {snappy}.gz',
                f'mkdir -p {shared}/constant/triSurface',
                f'cp "$FOAM_TUTORIALS/resources/geometry/motorBike.obj.gz" '
                f'{shared}/constant/triSurface/',
                foam_set(snappy, 'castellatedMeshControls/features',
                         f'({{file \\"motorBike.eMesh\\"; level {level};}})'),
                foam_set(snappy, 'castellatedMeshControls/refinementSurfaces/motorBike/level',
                         f'({level - 1} {level})'),
                foam_set(snappy, 'castellatedMeshControls/refinementRegions/refinementBox/'
                         'levels', f'((1E15 {level - 1}))'),
                foam_set(f'{shared}/system/blockMeshDict', 'blocks',
                         f'(hex (0 1 2 3 4 5 6 7) ({cells}) simpleGrading (1 1 1))'),
                foam_set(f'{shared}/system/controlDict', 'endTime', self.end_time),
                foam_set(f'{shared}/system/controlDict', 'writeInterval', self.write_interval),
                decompose_par_dict(f'{shared}/system/decomposeParDict', self.num_tasks)])),
            self.step('features', in_case(shared, 'surfaceFeatureExtract')),
            self.step('blockMesh', in_case(shared, 'blockMesh')),
            self.step('snappyHexMesh', in_case(shared, 'snappyHexMesh', '-overwrite')),
            self.step('initial-fields', f'rm -rf {shared}/0 && cp -r {shared}/0.orig '
                      f'{shared}/0 && cp -r {shared} {reference}'),
            # the reference: the same run with the case on shared storage throughout
            self.step('shared-decompose', in_case(reference, 'decomposePar')),
            self.step('shared-potential', self.in_parallel(reference, 'potentialFoam', '-writephi')),
            self.step('shared-solve', self.in_parallel(reference, 'simpleFoam')),
            self.step('shared-reconstruct', in_case(reference, 'reconstructPar', '-latestTime')),
            # [OCI-OpenFOAM]'s seven steps, and what each node holds after them
            self.state('shared', shared),
            self.step('stage-in', f'nvme-stage stage-in {shared} {local}'),
            self.state('stage-in', local),
            self.step('decompose', in_case(local, 'decomposePar', '-force')),
            self.state('decompose', local),
            self.step('fan-out', f'nvme-stage fan-out --own-ranks {local}'),
            self.state('fan-out', local, everywhere=True),
            self.step('potential', self.in_parallel(local, 'potentialFoam', '-writephi')),
            self.step('solve', self.in_parallel(local, 'simpleFoam')),
            self.state('solve', local, everywhere=True),
            self.step('collect', f'nvme-stage collect {local}'),
            self.state('collect', local),
            self.step('reconstruct', in_case(local, 'reconstructPar', '-latestTime')),
            self.state('reconstruct', local),
            self.step('stage-out', f'nvme-stage stage-out {local} {shared}'),
            self.state('stage-out', shared),
            # each node removes its own copy
            self.step('cleanup', self.on_each_node(f'rm -rf {local}')),
        ]
        self.executable = ' && '.join(
            f'python3 -m iostack_rfm.jobs.nodestate fields {case} --label {label}'
            for case, label in ((shared, 'nvme'), (reference, 'shared')))
        self.keep_logs('case/log.snappyHexMesh', 'case/log.potentialFoam', 'case/log.simpleFoam',
                       'shared-run/log.potentialFoam', 'shared-run/log.simpleFoam')

    @sanity_function
    def validate(self):
        checks = [
            self.steps_ok(['layout', 'prepare', 'features', 'blockMesh', 'snappyHexMesh',
                           'initial-fields', *SHARED_STEPS, 'shared-reconstruct',
                           *SEVEN_STEPS, 'reconstruct', 'cleanup']
                          + [f'state-{s}' for s in ('shared', 'stage-in', 'decompose',
                                                    'fan-out', 'solve', 'collect',
                                                    'reconstruct', 'stage-out')]),
            sn.assert_eq(parsed(nodestate.staging_problems, self.stdout,
                                ranks_per_node=self.num_tasks_per_node), [], msg='{0}'),
            sn.assert_eq(parsed(nodestate.field_problems, self.stdout, label='nvme',
                                reference='shared'), [],
                         msg='the NVMe run differs from the shared-storage run: {0}'),
        ]
        for case in ('case', 'shared-run'):
            log = f'{case}/log.simpleFoam'
            checks += [sn.assert_true(parsed(openfoam.finished, log), msg=f'{log}: no End'),
                       sn.assert_eq(parsed(openfoam.iterations, log), self.end_time)]
        return sn.all(checks)

    @run_after('init')
    def set_perf_variables(self):
        for step in SEVEN_STEPS + SHARED_STEPS:
            self.perf_variables[f'seconds_{step.replace("-", "_")}'] = \
                sn.make_performance_function(self.step_seconds(step), 's')

    @performance_function('s')
    def seconds_total(self):
        return sum(self.step_seconds(step) for step in SEVEN_STEPS)

    @performance_function('s')
    def seconds_total_shared(self):
        return sum(self.step_seconds(step) for step in SHARED_STEPS)

    @performance_function('ratio')
    def nvme_against_shared(self):
        """(NVMe total - shared total) / shared total; [OCI-OpenFOAM]: -0.262."""
        return self.seconds_total() / self.seconds_total_shared() - 1

    @performance_function('s')
    def clock_time_simplefoam(self):
        return parsed(openfoam.clock_seconds, 'case/log.simpleFoam')


@rfm.simple_test
class PitzDailyInterNodeCheck(ClusterJob):
    descr = 'pitzDaily on 1, 2, ... whole nodes over the network: same residuals, ClockTime'
    tutorial = variable(str, value='incompressible/simpleFoam/pitzDaily')
    #: the tutorial's own limit; it converges in under 300 iterations
    end_time = variable(int, value=2000)
    #: the tutorial's residualControl (system/fvSolution), by solved field
    residual_controls = variable(dict, value={'p': 1e-2, 'U[xyz]': 1e-3, 'k': 1e-3,
                                              'epsilon': 1e-3})
    #: how far a run may converge from the one-node run: iterations, final residuals
    iterations_rtol = variable(float, value=0.05)
    residuals_rtol = variable(float, value=0.1)
    time_limit = '1h'
    tags = {'openfoam', 'scaling', 'cluster', 'nightly'}

    @property
    def counts(self):
        return range(1, self.nodes + 1)

    @run_before('run')
    def set_job(self):
        per_node = self.num_tasks_per_node
        self.prerun_cmds = [
            self.step('prepare', tutorial_case(self.tutorial, 'base', self.end_time)),
            self.step('mesh', in_case('base', 'blockMesh')),
        ]
        for n in self.counts:
            case = f'nodes{n}'
            self.prerun_cmds += [
                self.step(f'decompose-{n}', ' && '.join([
                    f'cp -r base {case}',
                    decompose_par_dict(f'{case}/system/decomposeParDict', n * per_node),
                    f'(cd {case} && decomposePar > log.decomposePar 2>&1)'])),
                self.step(f'solve-{n}', f'(cd {case} && '
                          f'{self.mpi_command(f"-N {n}", f"-n {n * per_node}")} '
                          'simpleFoam -parallel > log.simpleFoam 2>&1)'),
            ]
        self.executable = 'true'
        self.keep_logs(*(f'nodes{n}/log.simpleFoam' for n in self.counts))

    @sanity_function
    def validate(self):
        checks = [self.steps_ok(['prepare', 'mesh'] + [f'{s}-{n}' for n in self.counts
                                                      for s in ('decompose', 'solve')])]
        for n in self.counts:
            log = f'nodes{n}/log.simpleFoam'
            checks += [
                sn.assert_le(parsed(openfoam.converged_at, log), self.end_time),
                sn.assert_eq(parsed(openfoam.residuals_above, log,
                                    limits=self.residual_controls), [],
                             msg=f'{n} nodes: residuals above control: {{0}}'),
                sn.assert_eq(parsed(residuals_apart, log, 'nodes1/log.simpleFoam',
                                    residuals_rtol=self.residuals_rtol,
                                    iterations_rtol=self.iterations_rtol), [],
                             msg=f'{n} nodes against 1: {{0}}'),
            ]
        return sn.all(checks)

    @run_after('init')
    def set_perf_variables(self):
        for n in range(1, self.nodes + 1):
            log = f'nodes{n}/log.simpleFoam'
            self.perf_variables[f'clock_time_{n}node'] = sn.make_performance_function(
                parsed(openfoam.clock_seconds, log), 's')
            self.perf_variables[f'iterations_{n}node'] = sn.make_performance_function(
                parsed(openfoam.converged_at, log), 'iterations')
