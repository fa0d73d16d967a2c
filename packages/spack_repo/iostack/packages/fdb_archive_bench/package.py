# iostack: fdb-archive-bench, FDB archive throughput with the key or from the message
# ([OIFS-HECToR]'s IFS I/O server path beside fdb-hammer's).
from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.iostack.in_repo import checked_source

from spack.package import *


class FdbArchiveBench(CMakePackage):
    """Archives GRIB fields into FDB with the key the writer already has
    (fdb5::FDB::archive(key, data, length), as the IFS I/O server does) or from the message
    alone (FDB decodes it, as fdb-hammer does), by one or several concurrent writers;
    reports throughput and CPU, and verifies the fields read back."""

    homepage = "https://github.com/iostack/iostack"

    maintainers("iostack")
    license("Apache-2.0")

    # Nothing to download: the code is in the same repository as this recipe, so the
    # iostack commit pins it and no sha256 exists. The version must match project(VERSION)
    # in its CMakeLists.txt (checked before configuring).
    has_code = False
    # 1.1.0: the raw path (--path raw), resource counters, FDB_HOME's resource file,
    # fdb-archive-profile
    version("1.1.0")
    # sha256 of src/fdb-archive-bench per version (in_repo.tree_sha256): a changed source needs a new one
    SOURCE_SHA256 = {"1.1.0": "7d200acbdaff668117f5bdac666fa3ca78458f735d35248d940c346afe49e8a6"}

    depends_on("cxx", type="build")
    depends_on("cmake@3.18:", type="build")
    # FDB's package config brings eckit and metkit; ecCodes encodes the fields
    depends_on("fdb")
    depends_on("eccodes")

    @run_before("cmake")
    def copy_in_repo_source(self):
        """Bring the in-repo tree into the stage, so the build never reads from the checkout
        after this point and `spack install` stays offline."""
        source = checked_source(self, "fdb-archive-bench", "CMakeLists.txt",
                                r"project\(\s*\S+\s+VERSION\s+(\S+)", self.SOURCE_SHA256)
        copy_tree(source, self.stage.source_path)
