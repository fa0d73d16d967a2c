"""ReFrame side of the application checks: where an application comes from (modules per
environment), how MPI ranks are started, and the step pattern (iostack_rfm.apps.steps).

    class MyAppCheck(AppCheck):
        app_features = ['openfoam']                  # environments need +openfoam
        @run_before('run')
        def set_job(self):
            self.prerun_cmds = [self.step('mesh', 'blockMesh > log.blockMesh 2>&1'),
                                self.step('solve', f'{self.mpi_command()} simpleFoam -parallel')]
        @sanity_function
        def validate(self):
            return sn.all([self.steps_ok(['mesh', 'solve']), ...])
"""
import os

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, run_before, variable

from iostack_rfm.apps import steps as _steps
from iostack_rfm.mixins import RecordedReferences, io_dir

#: reframe-tests/, which jobs put on PYTHONPATH for `python3 -m iostack_rfm...`
RFM_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Open MPI refuses to start as root unless told twice; CI containers run as root.
OPENMPI_AS_ROOT = {'OMPI_ALLOW_RUN_AS_ROOT': '1', 'OMPI_ALLOW_RUN_AS_ROOT_CONFIRM': '1'}


class AppEnvironment(rfm.RegressionTestPlugin):
    """Selects environments with the check's application features and loads the modules
    their `extras['app_modules']` name for them (nothing where the application is on
    PATH, like Debian's on the local site)."""

    #: environment features naming the applications the check runs
    app_features = variable(typ.List[str], value=[])

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


class MpiLaunch(rfm.RegressionTestPlugin):
    """MPI programs run as steps, each launched by `mpi_command()`: the partition's
    launcher with its `extras['launcher_options']` (seed 003's binding) and
    `extras['mpi_launcher_options']` (PMI selection), or its
    `extras['mpi_launcher']` where its own starts no ranks (the local scheduler's), with Open
    MPI allowed to run as root. The job's own executable line runs on the batch host (a
    summary or comparison), not under the launcher."""

    @run_after('setup')
    def set_launchers(self):
        name = self.current_partition.extras.get('mpi_launcher')
        self._mpi_launcher = getlauncher(name)() if name else self.job.launcher
        if self._mpi_launcher.registered_name in ('mpirun', 'mpiexec'):
            self.env_vars.update(OPENMPI_AS_ROOT)
        self.job.launcher = getlauncher('local')()

    def mpi_command(self, *extra):
        """The launch command for the job's ranks, for a step that starts an MPI program."""
        extras = self.current_partition.extras
        options = extras.get('launcher_options', []) + extras.get('mpi_launcher_options', [])
        # ReFrame copies these to the job only when the run stage starts
        self.job.num_tasks = self.num_tasks
        self.job.num_tasks_per_node = self.num_tasks_per_node
        self.job.num_cpus_per_task = self.num_cpus_per_task
        return ' '.join([self._mpi_launcher.run_command(self.job), *options, *extra]).strip()


class WholeNodes(rfm.RegressionTestPlugin):
    """One MPI rank per core on `self.nodes` whole nodes of the partition (the check
    defines `nodes`, usually as a parameter)."""

    @run_after('setup')
    def use_whole_nodes(self):
        self.num_tasks_per_node = self.current_partition.processor.num_cpus or 1
        self.num_tasks = self.nodes * self.num_tasks_per_node


class AppCheck(RecordedReferences, MpiLaunch, AppEnvironment, rfm.RunOnlyRegressionTest):
    """Base of the application checks: recorded references, MPI launch, application
    modules, named steps."""

    valid_prog_environs = ['*']
    maintainers = ['iostack']

    def step(self, name, command):
        return _steps.timed(name, command)

    @run_before('run')
    def set_pythonpath(self):
        # the job-side tools: python3 -m iostack_rfm.<module>
        self.env_vars.setdefault('PYTHONPATH', f'{RFM_ROOT}:$PYTHONPATH')

    def steps_ok(self, expected):
        """Sanity: every step ran and exited with 0."""
        return sn.assert_eq(_failed_steps(self.stdout, list(expected)), [], msg='{0}')

    def step_seconds(self, name):
        return _step_seconds(self.stdout, name)


@sn.deferrable
def _failed_steps(path, expected):
    with open(path) as f:
        return _steps.failed(f.read(), expected)


@sn.deferrable
def _step_seconds(path, name):
    with open(path) as f:
        found = _steps.parse(f.read())
    if name not in found:
        raise ValueError(f'step {name} not in {path}')
    return found[name].seconds


def shared_io_dir(test):
    """Where a benchmark whose ranks on different nodes share files writes: the partition's
    io_dir, unless that is node-local (feature `nvme`), then the stage directory (on the
    file system ReFrame's prefix is on, shared by the nodes)."""
    if 'nvme' in test.current_partition.features:
        return test.stagedir
    return io_dir(test)
