# iostack: netcdf-output-bench, the INMCM6 atmosphere output benchmark ([INMCM-NetCDF]).
from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.iostack.in_repo import checked_source

from spack.package import *


class NetcdfOutputBench(CMakePackage):
    """MPI benchmark of an earth-system model's daily atmosphere output (INMCM6P/M
    grids): writes it as the model's gathered binary files, one NetCDF file per field,
    one per output type, or batched records per type, with netCDF-C (NetCDF-4 on
    parallel HDF5) or PnetCDF (CDF-5), and verifies the data read back."""

    homepage = "https://github.com/iostack/iostack"

    maintainers("iostack")
    license("Apache-2.0")

    # Nothing to download: the code is in the same repository as this recipe, so
    # the iostack commit is what pins it and no sha256 exists. The version must
    # match project(VERSION) in its CMakeLists.txt (checked before configuring).
    has_code = False
    version("1.1.1")
    # sha256 of src/netcdf-output-bench per version (in_repo.tree_sha256): a changed source needs a new one
    SOURCE_SHA256 = {"1.1.1": "5017e16d0915c210c8ac7c0b1bdf1cc9e7ea5fbaaaa39ad70a34669422b4fc36"}

    depends_on("c", type="build")
    depends_on("cmake@3.18:", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("mpi")
    # The NetCDF modes need parallel NetCDF-4 (HDF5 over MPI-IO) and PnetCDF for CDF-5.
    depends_on("netcdf-c+mpi")
    depends_on("parallel-netcdf")

    @run_before("cmake")
    def copy_in_repo_source(self):
        """Bring the in-repo tree into the stage, so the build never reads from the checkout
        after this point and `spack install` stays offline."""
        source = checked_source(self, "netcdf-output-bench", "CMakeLists.txt",
                                r"project\(\s*\S+\s+VERSION\s+(\S+)", self.SOURCE_SHA256)
        copy_tree(source, self.stage.source_path)
