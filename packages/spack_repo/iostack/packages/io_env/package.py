# iostack: one module for the I/O benchmarks and libraries of seeds 001, 002 and 004.
from spack_repo.builtin.build_systems.bundle import BundlePackage

from spack.package import *


class IoEnv(BundlePackage):
    """I/O benchmarks and parallel I/O libraries: IOR/mdtest, IO500, Darshan, netCDF-C,
    PnetCDF, HDF5 (all MPI-enabled) and iostack's NetCDF output benchmark."""

    homepage = "https://io500.org"

    version("1.0")

    depends_on("ior", type="run")
    depends_on("io500", type="run")
    depends_on("darshan-runtime", type="run")
    depends_on("darshan-util", type="run")
    depends_on("netcdf-c+mpi", type="run")
    depends_on("parallel-netcdf", type="run")
    depends_on("hdf5+mpi", type="run")
    depends_on("netcdf-output-bench", type="run")
