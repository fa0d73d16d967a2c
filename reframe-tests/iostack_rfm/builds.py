"""Build fixtures of the checks: the repository's own programs, compiled once per
environment against the environment's libraries (on the local site Debian's; on clusters
the modules its `extras['app_modules']` name for the fixture's features)."""
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_before, sanity_function, variable

from iostack.core import paths
from iostack_rfm.base import IostackMixin


class GribGenBuild(rfm.CompileOnlyRegressionTest):
    """gribgen (reframe-tests/src), the deterministic GRIB2 field writer, against the
    environment's ecCodes."""

    descr = 'build gribgen (ecCodes C API)'
    build_system = 'SingleSource'
    sourcesdir = str(paths.RFM_SRC / 'gribgen')
    sourcepath = 'gribgen.c'
    executable = 'gribgen'
    #: extra link flags, for sites whose ecCodes is not on the default search path
    eccodes_ldflags = variable(list, value=[])

    @run_before('compile')
    def set_build_flags(self):
        self.build_system.cflags = ['-O2', '-Wall']
        self.build_system.ldflags = self.eccodes_ldflags + ['-leccodes', '-lm']

    @sanity_function
    def built(self):
        return sn.path_isfile(self.executable)

    @property
    def program_path(self):
        return os.path.join(self.stagedir, self.executable)


class CMakeBuild(IostackMixin, rfm.CompileOnlyRegressionTest):
    """Configure and build a CMake project of src/ out of source; `program` is the target
    the checks run, at `program_path`."""

    build_system = 'CMake'
    #: the target executable, relative to the build directory
    program = variable(str)
    build_type = variable(str, value='Release')

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
    """src/netcdf-output-bench ([INMCM-NetCDF]) against the environment's MPI, parallel netCDF-C
    and PnetCDF."""

    descr = 'build netcdf-output-bench (CMake, MPI, netCDF-C/HDF5, PnetCDF)'
    app_features = ['netcdf']
    sourcesdir = str(paths.SRC / 'netcdf-output-bench')
    program = 'netcdf-output-bench'


class FdbArchiveBenchBuild(CMakeBuild):
    """src/fdb-archive-bench ([OIFS-HECToR]'s archive path of the IFS I/O server) against the
    environment's FDB, found by CMake's find_package(fdb5): Debian's libfdb5-dev, or a
    Spack-built fdb on CMAKE_PREFIX_PATH (its module)."""

    descr = 'build fdb-archive-bench (CMake, libfdb5, ecCodes)'
    app_features = ['fdb']
    sourcesdir = str(paths.SRC / 'fdb-archive-bench')
    program = 'fdb-archive-bench'
