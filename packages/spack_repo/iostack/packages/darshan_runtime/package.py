# iostack: Darshan's runtime library (the I/O profiler's LD_PRELOAD/link-time part).
# Subclasses builtin; only the source changes (darshan.py).
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
