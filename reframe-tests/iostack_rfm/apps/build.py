"""Build fixtures of the application checks: the repository's own programs, compiled once per
environment with CMake against the environment's libraries (on the local site Debian's; on
clusters the modules its `extras['app_modules']` name for the fixture's features)."""
import os
import pathlib

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_before, sanity_function, variable

from iostack_rfm.apps.base import AppEnvironment

REPO_SRC = pathlib.Path(__file__).resolve().parents[3] / 'src'


class CMakeBuild(AppEnvironment, rfm.CompileOnlyRegressionTest):
    """Configure and build a CMake project of src/ out of source; `program` is the target
    the checks run, at `program_path`."""

    build_system = 'CMake'
    #: the target executable, relative to the build directory
    program = variable(str)
    build_type = variable(str, value='Release')
    maintainers = ['iostack']

    @run_before('compile')
    def configure(self):
        self.build_system.builddir = 'build'
        self.build_system.config_opts = [f'-DCMAKE_BUILD_TYPE={self.build_type}']
        self.build_system.max_concurrency = 4

    @property
    def program_path(self):
        return os.path.join(self.stagedir, 'build', self.program)

    @sanity_function
    def built(self):
        return sn.assert_true(sn.path_isfile(os.path.join('build', self.program)),
                              msg=f'build/{self.program} was not built')


class NetcdfOutputBenchBuild(CMakeBuild):
    """src/netcdf-output-bench (seed 002) against the environment's MPI, parallel netCDF-C
    and PnetCDF."""

    descr = 'build netcdf-output-bench (CMake, MPI, netCDF-C/HDF5, PnetCDF)'
    app_features = ['netcdf']
    sourcesdir = str(REPO_SRC / 'netcdf-output-bench')
    program = 'netcdf-output-bench'
