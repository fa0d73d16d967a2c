# iostack: fdb-archive-bench, FDB archive throughput with the key or from the message
# ([OIFS-HECToR]'s IFS I/O server path beside fdb-hammer's).
from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.iostack.in_repo import InRepoPackage

from spack.package import *


class FdbArchiveBench(InRepoPackage, CMakePackage):
    """Archives GRIB fields into FDB with the key the writer already has
    (fdb5::FDB::archive(key, data, length), as the IFS I/O server does) or from the message
    alone (FDB decodes it, as fdb-hammer does), by one or several concurrent writers;
    reports throughput and CPU, and verifies the fields read back."""

    # The code is beside this recipe (src/, in_repo.py); project(VERSION) in its
    # CMakeLists.txt must be the version (checked before configuring).
    version_file = "CMakeLists.txt"
    version_pattern = r"project\(\s*\S+\s+VERSION\s+(\S+)"
    version("1.0.0")
    # sha256 of src/ per version (iostack.core.digest.tree_sha256): a changed source needs a new one
    SOURCE_SHA256 = {"1.0.0": "de139a8686adc9e7424834c98a1f4cbc32fa6edf4220f37d578a5c05b873c69a"}

    depends_on("cxx", type="build")
    depends_on("cmake@3.18:", type="build")
    # FDB's package config brings eckit and metkit; ecCodes encodes the fields
    depends_on("fdb")
    depends_on("eccodes")

    @run_before("cmake")
    def copy_in_repo_source(self):
        self.stage_in_repo_source()
