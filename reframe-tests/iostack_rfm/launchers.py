"""Launchers of iostack's ReFrame systems, registered when the configuration imports this.

`mpirun-ranks`, the local partition's: `mpirun -np N` for a job of N > 1 tasks, so any MPI
check starts every rank; a single task runs bare, as with the `local` launcher (under
mpirun, Open MPI would bind it to one core, threads and children included).
"""
from reframe.core.backends import register_launcher
from reframe.core.launchers.mpi import MpirunLauncher


@register_launcher('mpirun-ranks')
class MpirunRanksLauncher(MpirunLauncher):
    def command(self, job):
        return super().command(job) if (job.num_tasks or 1) > 1 else []
