# iostack_detect: parallel-netcdf as `spack external find` can find it (bin/iostack site init).
from spack_repo.builtin.packages.parallel_netcdf.package import (
    ParallelNetcdf as BuiltinParallelNetcdf,
)
from spack_repo.iostack_detect.detection import installed_prefix, pkgconfig_of

from spack.package import *


class ParallelNetcdf(BuiltinParallelNetcdf):
    """PnetCDF, detectable: builtin's recipe has no detection. Found by libpnetcdf and its
    pkg-config file (version, prefix); PnetCDF's own pnetcdf-config is a separate Debian
    package a login node need not have."""

    libraries = [r"^libpnetcdf\.so$"]

    @classmethod
    def determine_version(cls, lib):
        return pkgconfig_of(lib).get("Version") or None

    @classmethod
    def determine_variants(cls, libs, version_str):
        return [("", installed_prefix(lib)) for lib in libs]
