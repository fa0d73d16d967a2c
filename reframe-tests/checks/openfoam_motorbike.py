"""OpenFOAM HPC Benchmark Suite, HPC_Motorbike Small, as [OCI-OpenFOAM] ran it on BM.Optimized3.36:
decomposePar, potentialFoam and simpleFoam (500 iterations), each step timed.

Three checks, one per experiment of the seed, sharing one meshed case (fixture
HpcMotorbikeSmallMesh, the suite's own meshing steps):

- HpcMotorbikeIntraNodeCheck: 8, 16, 32 and 36 ranks on one node, on NPS1 and NPS2 nodes
  (the partitions' features `nps1`/`nps2`; the partition binds as the seed did);
- HpcMotorbikeInterNodeCheck: 1, 2, 4 and 8 nodes at 32 and 36 ranks per node, NPS2;
- HpcMotorbikeStorageCheck: 8 nodes x 36 ranks writing every 10 iterations, with the case
  on the shared file system (ReFrame's stage directory) or on node-local NVMe through
  [OCI-OpenFOAM]'s seven steps with `nvme-stage` (1 stage-in, 2 decomposePar on the head node,
  3 fan-out, 4 potentialFoam, 5 simpleFoam, 6 collect each node's processor directories,
  7 stage-out without them). The first two use NVMe too, as the seed did.

Sanity: every step exits 0; simpleFoam ran exactly the case's endTime iterations and ended;
potentialFoam ended; there is one processor directory per rank, each with every time the
writeInterval asks for (endTime / writeInterval, none at the default 1000); after stage-out
the shared case holds the logs but no processor directories.

Performance: each step's wall time, their total (what the seed compared) and simpleFoam's
ClockTime. [OCI-OpenFOAM]'s findings (NVMe -26.2 % total, simpleFoam -40.4 %, decomposePar
-34.2 %, 46 s of rsync; NPS2 1.8 % cheaper than NPS1; 36 ranks the best on one node) are
documented expectations in references/openfoam_motorbike.yaml; absolute baselines are
recorded per site.

The suite is cloned from `suite_url` on the first node of the mesh job; air-gapped sites
point `suite_dir` at a copy.
"""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (fixture, parameter, performance_function, run_after,
                                   run_before, sanity_function, variable)

from iostack_rfm.jobs import openfoam
from iostack_rfm.base import AppCheck, parsed
from iostack_rfm.jobs.openfoam import foam_set, in_case

SEVEN_STEPS = ('stage-in', 'decompose', 'fan-out', 'potential', 'solve', 'collect',
               'stage-out')
SHARED_STEPS = ('decompose', 'potential', 'solve')


class HpcMotorbikeSmallMesh(AppCheck):
    """The Small mesh (about 8.5 million cells, the suite's README), made with the suite's
    steps: blockMesh, decomposePar, snappyHexMesh in parallel, reconstructParMesh."""

    descr = 'HPC_Motorbike Small: fetch the suite and mesh the case'
    valid_systems = ['+mpi +nvme -small-io']
    app_features = ['openfoam']
    suite_url = variable(str, value='https://develop.openfoam.com/committees/hpc.git')
    #: a copy of the suite (air-gapped sites); used instead of cloning when set
    suite_dir = variable(str, value='')
    case_path = variable(str, value='incompressible/simpleFoam/HPC_motorbike/Small/v1912')
    #: the suite meshes with 16 tasks
    num_tasks = 16
    #: the suite's README: 8.5 million cells
    cells_bounds = variable(tuple, value=(8.0e6, 9.0e6))
    time_limit = '2h'

    @run_before('run')
    def set_job(self):
        fetch = (f'cp -r {self.suite_dir} suite' if self.suite_dir
                 else f'git clone --depth 1 {self.suite_url} suite')
        self.prerun_cmds = [
            self.step('fetch', f'{fetch} && cp -r suite/{self.case_path} case && rm -rf suite'),
            # the geometry ships with OpenFOAM's tutorials where the suite has none
            self.step('geometry', 'ls case/constant/triSurface/motorBike.obj* > /dev/null 2>&1 '
                      '|| { mkdir -p case/constant/triSurface && cp '
                      '"$FOAM_TUTORIALS/resources/geometry/motorBike.obj.gz" '
                      'case/constant/triSurface/; }'),
            self.step('blockMesh', in_case('case', 'blockMesh')),
            self.step('decompose', ' && '.join([
                foam_set('case/system/decomposeParDict', 'numberOfSubdomains', self.num_tasks),
                '(cd case && decomposePar -force > log.decomposePar 2>&1)'])),
            self.step('snappyHexMesh', in_case('case', 'snappyHexMesh', '-overwrite',
                                               mpi_command=self.mpi_command())),
            self.step('reconstructParMesh', in_case('case', 'reconstructParMesh', '-constant')),
            self.step('clean', 'rm -rf case/processor*'),
            self.step('checkMesh', in_case('case', 'checkMesh', '-constant')),
        ]
        self.executable = 'true'

    @sanity_function
    def validate(self):
        cells = sn.extractsingle(r'^\s*cells:\s+(\d+)', 'case/log.checkMesh', 1, int)
        return sn.all([
            self.steps_ok(['fetch', 'geometry', 'blockMesh', 'decompose', 'snappyHexMesh',
                           'reconstructParMesh', 'clean', 'checkMesh']),
            sn.assert_found(r'^Mesh OK\.', 'case/log.checkMesh'),
            sn.assert_bounded(cells, *self.cells_bounds),
        ])

    @performance_function('cells')
    def cells(self):
        return sn.extractsingle(r'^\s*cells:\s+(\d+)', 'case/log.checkMesh', 1, int)


class HpcMotorbikeBase(AppCheck):
    """One HPC_Motorbike run; subclasses give `nodes`, `ranks_per_node`, `storage` ('nvme'
    or 'shared') and `write_interval` as parameters or variables."""

    app_features = ['openfoam']
    mesh = fixture(HpcMotorbikeSmallMesh, scope='session')
    #: the case's own (the suite's controlDict)
    end_time = variable(int, value=500)
    time_limit = '3h'

    @run_after('init')
    def set_layout(self):
        self.num_tasks = self.nodes * self.ranks_per_node
        self.num_tasks_per_node = self.ranks_per_node
        self.tags = {'openfoam', 'cfd', 'io', 'performance', 'weekly'}

    @property
    def flow_steps(self):
        return SEVEN_STEPS if self.storage == 'nvme' else SHARED_STEPS

    @run_before('run')
    def set_job(self):
        shared = f'{self.stagedir}/case'
        local = self.io_dir() if self.storage == 'nvme' else shared
        where = local if self.storage == 'nvme' else shared
        control = f'{shared}/system/controlDict'
        self.prerun_cmds = [
            # the case starts on shared storage, as in the seed
            self.step('prepare', ' && '.join([
                f'cp -r {self.mesh.stagedir}/case {shared}',
                f'rm -rf {shared}/0 && cp -r {shared}/0.org {shared}/0',
                foam_set(control, 'writeInterval', self.write_interval),
                foam_set(control, 'endTime', self.end_time),
                foam_set(f'{shared}/system/decomposeParDict', 'numberOfSubdomains',
                         self.num_tasks)])),
        ]
        if self.storage == 'nvme':
            self.prerun_cmds.append(self.step('stage-in', f'nvme-stage stage-in {shared} {local}'))
        self.prerun_cmds.append(self.step('decompose', in_case(where, 'decomposePar', '-force')))
        if self.storage == 'nvme':
            self.prerun_cmds.append(self.step('fan-out', f'nvme-stage fan-out {local}'))
        self.prerun_cmds += [
            self.step('potential', in_case(where, 'potentialFoam', '-writephi',
                                           mpi_command=self.mpi_command())),
            self.step('solve', in_case(where, 'simpleFoam', mpi_command=self.mpi_command())),
        ]
        if self.storage == 'nvme':
            self.prerun_cmds += [
                self.step('collect', f'nvme-stage collect {local}'),
                self.step('stage-out', f'nvme-stage stage-out {local} {shared}'),
                openfoam.summary_command(local, 'result'),
                # node-local copies go; each node removes its own
                self.step('cleanup', f'srun -N {self.nodes} -n {self.nodes} '
                          f'--ntasks-per-node=1 rm -rf {local}'),
            ]
        else:
            self.prerun_cmds.append(openfoam.summary_command(shared, 'result'))
        self.executable = openfoam.summary_command(shared, 'shared')

    def _summary(self, label, key):
        return parsed(openfoam.summary_value, self.stdout, label=label, key=key)

    @sanity_function
    def validate(self):
        steps = ['prepare', *self.flow_steps] + (['cleanup'] if self.storage == 'nvme' else [])
        checks = [
            self.steps_ok(steps),
            sn.assert_true(parsed(openfoam.finished, 'case/log.potentialFoam')),
            sn.assert_true(parsed(openfoam.finished, 'case/log.simpleFoam')),
            sn.assert_eq(parsed(openfoam.iterations, 'case/log.simpleFoam'), self.end_time),
            sn.assert_eq(self._summary('result', 'processors'), str(self.num_tasks)),
            sn.assert_eq(self._summary('result', 'written'),
                         str(self.end_time // self.write_interval)),
        ]
        if self.storage == 'nvme':
            # step 7 brings the logs back but no processor directories
            checks.append(sn.assert_eq(self._summary('shared', 'processors'), '0'))
        return sn.all(checks)

    @run_after('init')
    def set_perf_variables(self):
        for step in SEVEN_STEPS:
            if step in self.flow_steps:
                self.perf_variables[f'seconds_{step.replace("-", "_")}'] = \
                    sn.make_performance_function(self.step_seconds(step), 's')

    @performance_function('s')
    def seconds_total(self):
        return sum(self.step_seconds(step) for step in self.flow_steps)

    @performance_function('s')
    def clock_time_simplefoam(self):
        return parsed(openfoam.clock_seconds, 'case/log.simpleFoam')


@rfm.simple_test
class HpcMotorbikeIntraNodeCheck(HpcMotorbikeBase):
    descr = 'HPC_Motorbike Small on one node: ranks 8/16/32/36, NPS1 and NPS2 ([OCI-OpenFOAM] §1)'
    valid_systems = ['+mpi +nvme +nps1 -small-io', '+mpi +nvme +nps2 -small-io']
    ranks_per_node = parameter([8, 16, 32, 36])
    nodes = variable(int, value=1)
    storage = variable(str, value='nvme')
    write_interval = variable(int, value=1000)


@rfm.simple_test
class HpcMotorbikeInterNodeCheck(HpcMotorbikeBase):
    descr = 'HPC_Motorbike Small on 1/2/4/8 nodes at 32 and 36 ranks per node ([OCI-OpenFOAM] §2)'
    valid_systems = ['+mpi +nvme +nps2 -small-io']
    nodes = parameter([1, 2, 4, 8])
    ranks_per_node = parameter([32, 36])
    storage = variable(str, value='nvme')
    write_interval = variable(int, value=1000)


@rfm.simple_test
class HpcMotorbikeStorageCheck(HpcMotorbikeBase):
    descr = ('HPC_Motorbike Small, writing every 10 iterations: shared storage vs NVMe '
             '([OCI-OpenFOAM] §3)')
    valid_systems = ['+mpi +nvme +nps2 -small-io']
    storage = parameter(['shared', 'nvme'])
    nodes = variable(int, value=8)
    ranks_per_node = variable(int, value=36)
    write_interval = variable(int, value=10)
