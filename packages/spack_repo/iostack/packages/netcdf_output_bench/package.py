# iostack: netcdf-output-bench, the INMCM6 atmosphere output benchmark (seed 002).
import os
import re

from spack_repo.builtin.build_systems.cmake import CMakePackage

from spack.package import *

# The source is this repository's src/netcdf-output-bench: package.py sits at
# packages/spack_repo/iostack/packages/netcdf_output_bench/, five levels below the root.
IN_REPO_SOURCE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), *[os.pardir] * 5, "src", "netcdf-output-bench"
)


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
    version("1.0.0")

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
        cmakelists = os.path.join(IN_REPO_SOURCE, "CMakeLists.txt")
        if not os.path.isfile(cmakelists):
            raise InstallError(f"netcdf-output-bench source not found at {IN_REPO_SOURCE}")
        with open(cmakelists) as f:
            declared = re.search(r"project\(\s*\S+\s+VERSION\s+(\S+)", f.read())
        if not declared or declared.group(1) != str(self.spec.version):
            raise InstallError(
                f"{cmakelists} declares version {declared and declared.group(1)}, "
                f"recipe builds {self.spec.version}: update the recipe's version()"
            )
        copy_tree(IN_REPO_SOURCE, self.stage.source_path)
