# iostack_detect: netcdf-fortran as `spack external find` can find it (bin/iostack site init).
import re

from spack_repo.builtin.packages.netcdf_fortran.package import NetcdfFortran as BuiltinNetcdfFortran

from spack.package import *


class NetcdfFortran(BuiltinNetcdfFortran):
    """netCDF-Fortran, detectable: builtin's recipe has no detection. Its nf-config states
    the version of the sources it was built from (`netCDF-Fortran 4.5.4`; Debian 12 calls the
    package 4.6.0+really4.5.4)."""

    executables = [r"^nf-config$"]

    @classmethod
    def determine_version(cls, exe):
        output = Executable(exe)("--version", output=str, error=str)
        match = re.search(r"netCDF-Fortran (\d+(\.\d+)+)", output)
        return match.group(1) if match else None
