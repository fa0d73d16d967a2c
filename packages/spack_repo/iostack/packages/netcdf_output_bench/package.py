# iostack: netcdf-output-bench, the INMCM6 atmosphere output benchmark ([INMCM-NetCDF]).
from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.iostack.in_repo import InRepoPackage

from spack.package import *


class NetcdfOutputBench(InRepoPackage, CMakePackage):
    """MPI benchmark of an earth-system model's daily atmosphere output (INMCM6P/M
    grids): writes it as the model's gathered binary files, one NetCDF file per field,
    one per output type, or batched records per type, with netCDF-C (NetCDF-4 on
    parallel HDF5) or PnetCDF (CDF-5), and verifies the data read back."""

    # The code is beside this recipe (src/, in_repo.py); project(VERSION) in its
    # CMakeLists.txt must be the version (checked before configuring).
    version_file = "CMakeLists.txt"
    version_pattern = r"project\(\s*\S+\s+VERSION\s+(\S+)"
    version("1.1.1")
    # sha256 of src/ per version (iostack.core.digest.tree_sha256): a changed source needs a new one
    SOURCE_SHA256 = {"1.1.1": "297af5fd998b3a499c8753b7d760be62f88608cc84b494809b0a58dc1f322eea"}

    depends_on("c", type="build")
    depends_on("cmake@3.18:", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("mpi")
    # The NetCDF modes need parallel NetCDF-4 (HDF5 over MPI-IO) and PnetCDF for CDF-5.
    depends_on("netcdf-c+mpi")
    depends_on("parallel-netcdf")

    @run_before("cmake")
    def copy_in_repo_source(self):
        self.stage_in_repo_source()

    # Stand-alone tests (`spack test run`; the nightly's smoke check runs them on a release)

    def test_version(self):
        """reports the recipe's version"""
        bench = which(self.prefix.bin.join("netcdf-output-bench"))
        out = bench("--version", output=str.split, error=str.split)
        assert out.strip() == f"netcdf-output-bench {self.spec.version}", out

    def test_batching_day_reads_back(self):
        """one INMCM6P day in batching mode with each library, every value read back"""
        bench = which(self.prefix.bin.join("netcdf-output-bench"))
        for library in ("netcdf", "pnetcdf"):
            with test_part(self, f"test_batching_day_reads_back_{library}",
                           purpose=f"batching with {library}, verified"):
                out = bench("--mode", "batching", "--library", library, "--days", "1",
                            "--sync", "none", "--output-dir", f"out-{library}", "--verify",
                            output=str.split, error=str.split)
                # the workload's bytes (79,488,000 per INMCM6P day), no value differing
                assert " bytes=79488000 " in out, out
                assert "verify: OK " in out and " mismatches=0 " in out, out
