# iostack_detect: netcdf-c as `spack external find` can find it (bin/iostack site init).
from spack_repo.builtin.packages.netcdf_c.package import NetcdfC as BuiltinNetcdfC
from spack_repo.iostack_detect.detection import installed_prefix, links, pkgconfig_of

from spack.package import *


class NetcdfC(BuiltinNetcdfC):
    """netCDF-C, detectable: builtin's recipe has no detection. Each libnetcdf library the
    dynamic linker can find is one installation (the serial and the MPI one sit side by side
    on Debian); its pkg-config file gives version and prefix, and the one that links MPI is
    the parallel (+mpi) one (every netCDF-C defines nc_create_par, a serial one to fail)."""

    libraries = [r"^libnetcdf(_\w+)?\.so$"]

    @classmethod
    def determine_version(cls, lib):
        return pkgconfig_of(lib).get("Version") or None

    @classmethod
    def determine_variants(cls, libs, version_str):
        found = []
        for lib in libs:
            mpi = "+mpi" if links(lib, b"libmpi") else "~mpi"
            found.append((mpi, installed_prefix(lib)))
        return found
