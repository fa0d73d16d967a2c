"""Build fixtures shared by the checks: small programs of ours, compiled once per environment."""
import pathlib

import reframe as rfm
from reframe.core.builtins import run_before, sanity_function, variable
import reframe.utility.sanity as sn

SRC = pathlib.Path(__file__).resolve().parents[1] / 'src'


class GribGenBuild(rfm.CompileOnlyRegressionTest):
    """Compiles gribgen, the deterministic GRIB2 field writer, against the environment's ecCodes."""

    descr = 'build gribgen (ecCodes C API)'
    build_system = 'SingleSource'
    sourcesdir = str(SRC / 'gribgen')
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
