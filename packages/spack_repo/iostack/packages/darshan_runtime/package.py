# iostack: Darshan's runtime library (the I/O profiler's LD_PRELOAD/link-time part).
# Subclasses builtin: the source (darshan.py), MPI found as Darshan says (CC=mpicc), no baked-in log directory.
from spack_repo.builtin.packages.darshan_runtime.package import (
    DarshanRuntime as BuiltinDarshanRuntime,
)
from spack_repo.iostack.darshan import DarshanFromTag

from spack.package import *


class DarshanRuntime(DarshanFromTag, BuiltinDarshanRuntime):
    """Darshan's runtime, built +mpi: one library instruments MPI programs and, with
    DARSHAN_ENABLE_NONMPI=1, serial ones too (Darshan 3.2 and later)."""

    def setup_run_environment(self, env):
        # builtin sets DARSHAN_LOG_DIR_PATH to $HOME of whoever generates the modules (the
        # deploy's account) and bakes it in; the darshan-profile meta-module sets it per user
        pass

    def configure_args(self):
        args = super().configure_args()
        if self.spec.satisfies("+mpi"):
            # Darshan's configure takes MPI only where CC compiles MPI programs, and otherwise
            # quietly builds without it ("checking for mpi.h... no"): so it did against
            # Debian's Open MPI, whose headers are not on the compiler's path, and MPI jobs
            # wrote no log. Its own instructions: CC=mpicc; --with-mpi makes a miss an error.
            args += [f"CC={self.spec['mpi'].mpicc}", "--with-mpi"]
        return args
