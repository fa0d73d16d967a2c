"""OpenFOAM on a CI-sized node: the pitzDaily tutorial (simpleFoam, 12,225 cells) run to
convergence serially and on 2 ranks, each twice, in one job so the timings do not compete.

Correctness: every run meets the case's residual controls ("SIMPLE solution converged in N
iterations", and the last initial residuals below the fvSolution limits); a rerun converges
at the same iteration and writes bit-identical fields (one digest over every written file,
iostack_rfm.jobs.openfoam); the 2-rank run has one processor directory per rank, both at the
converged time, and reconstructs to the serial mesh's cell count.

Performance: the solver's ClockTime (whole seconds, as OpenFOAM prints it) and the wall time
of the solver steps (the job's clock, nanoseconds), each the median of the run and its
rerun with their spread beside it, and the 2-rank/serial ratio of those (below 1: the
second rank helped). The iteration counts are correctness (the reruns converge at the same
iteration, within the case's limit), asserted in the sanity function.

The tutorial comes from $FOAM_TUTORIALS (Debian: package openfoam-examples, set by the
`stack` environment); the copy drops its function objects and writes only the converged
state, so the solver's I/O is the final fields.
"""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (performance_function, run_after, run_before,
                                   sanity_function, variable)

from iostack_rfm.jobs import openfoam
from iostack_rfm.base import AppCheck, median, parsed, spread
from iostack_rfm.jobs.openfoam import decompose_par_dict, in_case, tutorial_case

RUNS = ('serial', 'serial-rerun', 'parallel', 'parallel-rerun')


@rfm.simple_test
class OpenFOAMPitzDailyCheck(AppCheck):
    descr = ('pitzDaily serial and 2-rank: converged, bit-identical reruns, ClockTime '
             '([OCI-OpenFOAM])')
    # a tutorial-sized case: CI-class nodes; clusters run HPC_Motorbike
    valid_systems = ['+mpi +small-io']
    app_features = ['openfoam']
    num_tasks = 2
    tutorial = variable(str, value='incompressible/simpleFoam/pitzDaily')
    #: the tutorial's own limit; it converges in a few hundred iterations
    end_time = variable(int, value=2000)
    #: the tutorial's residualControl (system/fvSolution), by solved field
    residual_controls = variable(dict, value={'p': 1e-2, 'U[xyz]': 1e-3, 'k': 1e-3,
                                              'epsilon': 1e-3})
    time_limit = '15m'
    tags = {'openfoam', 'bit-identity', 'performance', 'nightly'}

    @run_before('run')
    def set_job(self):
        self.prerun_cmds = [
            self.step('prepare', tutorial_case(self.tutorial, 'base', self.end_time)),
            self.step('mesh', in_case('base', 'blockMesh')),
            self.step('copy', 'cp -r base serial && cp -r base serial-rerun && cp -r base parallel'),
            self.step('decompose', ' && '.join([
                decompose_par_dict('parallel/system/decomposeParDict', self.num_tasks),
                '(cd parallel && decomposePar > log.decomposePar 2>&1)',
                'cp -r parallel parallel-rerun'])),
            self.step('solve-serial', in_case('serial', 'simpleFoam')),
            self.step('solve-serial-rerun', in_case('serial-rerun', 'simpleFoam')),
            self.step('solve-parallel', in_case('parallel', 'simpleFoam',
                                                mpi_command=self.mpi_command())),
            self.step('solve-parallel-rerun', in_case('parallel-rerun', 'simpleFoam',
                                                      mpi_command=self.mpi_command())),
            self.step('reconstruct', in_case('parallel', 'reconstructPar', '-latestTime')),
        ]
        self.executable = ' && '.join(
            [openfoam.summary_command(run, run) for run in RUNS]
            + [openfoam.summary_command('parallel', 'reconstructed', top=True)])

    def _summary(self, label, key, conv=str):
        return parsed(openfoam.summary_value, self.stdout, label=label, key=key, conv=conv)

    def _log(self, reader, run, **options):
        return parsed(reader, f'{run}/log.simpleFoam', **options)

    @sanity_function
    def validate(self):
        checks = [self.steps_ok(['prepare', 'mesh', 'copy', 'decompose', 'solve-serial',
                                 'solve-serial-rerun', 'solve-parallel',
                                 'solve-parallel-rerun', 'reconstruct'])]
        for run in RUNS:
            converged_at = self._log(openfoam.converged_at, run)
            checks += [
                sn.assert_le(converged_at, self.end_time),
                sn.assert_eq(self._log(openfoam.residuals_above, run,
                                       limits=self.residual_controls), [],
                             msg=f'{run}: residuals above control: {{0}}'),
                # the fields of the converged iteration, nothing else
                sn.assert_eq(self._summary(run, 'times', conv=int), converged_at),
                sn.assert_eq(self._summary(run, 'written'), '1'),
            ]
        for run in ('serial', 'parallel'):
            checks += [
                sn.assert_eq(self._log(openfoam.converged_at, f'{run}-rerun'),
                             self._log(openfoam.converged_at, run)),
                sn.assert_eq(self._summary(f'{run}-rerun', 'files'), self._summary(run, 'files')),
                sn.assert_eq(self._summary(f'{run}-rerun', 'sha256'), self._summary(run, 'sha256'),
                             msg=f'{run} rerun wrote different fields: {{0}} != {{1}}'),
            ]
        checks += [
            sn.assert_eq(self._summary('serial', 'processors'), '0'),
            sn.assert_eq(self._summary('parallel', 'processors'), str(self.num_tasks)),
            sn.assert_eq(self._summary('parallel-rerun', 'processors'), str(self.num_tasks)),
            # the decomposition covers the mesh: processors' cells add up to the serial count
            sn.assert_eq(self._summary('parallel', 'cells'), self._summary('serial', 'cells')),
            sn.assert_eq(self._summary('reconstructed', 'cells'), self._summary('serial', 'cells')),
            sn.assert_eq(self._summary('reconstructed', 'times'), self._summary('parallel', 'times')),
        ]
        return sn.all(checks)

    def _wall(self, run):
        """The median wall time of `run`'s solver steps (the run and its rerun)."""
        return median(self.step_seconds(f'solve-{run}'), self.step_seconds(f'solve-{run}-rerun'))

    @run_after('init')
    def set_perf_variables(self):
        for label, run in (('serial', 'serial'), ('2rank', 'parallel')):
            self.perf_variables.update({
                f'clock_time_{label}': sn.make_performance_function(
                    median(self._log(openfoam.clock_seconds, run),
                            self._log(openfoam.clock_seconds, f'{run}-rerun')), 's'),
                f'wall_{label}': sn.make_performance_function(self._wall(run), 's'),
                f'wall_{label}_spread': sn.make_performance_function(
                    spread(self.step_seconds(f'solve-{run}'),
                            self.step_seconds(f'solve-{run}-rerun')), 'fraction'),
            })

    @performance_function('ratio')
    def time_ratio_2rank_serial(self):
        return self._wall('parallel') / self._wall('serial')

