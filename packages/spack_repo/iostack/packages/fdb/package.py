# iostack: FDB5 as the stack builds it. Subclasses builtin; adds only what the stack needs.
# FDB tunables (async write, buffer sizes, sync on flush, Lustre striping of roots) are
# run-time settings of FDB's config and environment: none is baked in here, and the patches'
# defaults keep FDB's durability.
from spack_repo.builtin.packages.fdb.package import Fdb as BuiltinFdb
from spack_repo.iostack.craype import CrayPEPackage
from spack_repo.iostack.upstream_tests import UpstreamTestsPackage

from spack.package import *


class Fdb(UpstreamTestsPackage, CrayPEPackage, BuiltinFdb):
    """FDB5 (Fields DataBase), extended for iostack's sites."""

    # OpenIFS 49r1 pins FDB 5.13.0, for which no published checksum could be had here.
    # 5.13.106 is the 5.13.x with one (builtin's recipe from spack-packages commit
    # 4aa3eb3a29afaaf9b638b1ca5998fee2ec0fe7cf, #3973, first released in v2026.06.0).
    # Lustre sites select the builtin variant backends=lustre in their packages.yaml.
    version("5.13.106", sha256="34c7ee498f7511f5255ffcfd94bee51264c6e4892063e2c2a172f2a4fd86062d")

    # The archive path at the speed of the disk (iostack issue 26; each patch's header says
    # what it does and why, docs/fdb-performance.md has the measurements):
    # fields of 1 MiB or more written from the caller's memory, not copied into the stdio
    # buffer first (fdbDirectWriteSize; 0 restores the copy)
    patch("fdb-5.13.106-direct-write.patch", when="@5.13.106")
    # FDB::archive(data, length) of one GRIB message decodes it where it lies (no copies,
    # one ecCodes parse)
    patch("fdb-5.13.106-archive-message-in-place.patch", when="@5.13.106")
    # fdbCatalogueSyncOnFlush: an opt-out of the index and TOC syncs at every flush, for
    # writers that sync the file system themselves. Default on (unchanged durability); off
    # trades durability for speed
    patch("fdb-5.13.106-catalogue-sync-on-flush.patch", when="@5.13.106")

    OFFLINE_EXCLUDED = {
        "fdb5_get_test_data": "downloads its GRIB files from ECMWF's test-data server at test time",
        "fdb5_archive_rd.vod.grib": "archives rd.vod.grib, which fdb5_get_test_data downloads",
        "fdb5_extract_rd.vod.grib": "extracts rd.vod.grib, which fdb5_get_test_data downloads",
        "get_fdb_api_test_data": "downloads its GRIB files from ECMWF's test-data server at test time",
        "test_fdb5_api_fdb_c": "archives x138-300.grib, which get_fdb_api_test_data downloads",
        "download_fdb5_regression_tests_files": "downloads sh.300.grib from ECMWF's test-data "
                                                "server at test time",
        "FDB-240.sh": "reads sh.300.grib, which download_fdb5_regression_tests_files downloads",
    }

    def setup_build_environment(self, env):
        super().setup_build_environment(env)
        if self.run_tests:
            # FDB finds ~fdb/etc/fdb by walking up from its library to /: on a node with an
            # FDB of its own (Debian's fdb5 puts dbnames, engines, ... in /etc/fdb) the
            # suite's tools would read that node's configuration (its dbnames rename the
            # databases, and four regression tests fail). The suite's is the build tree's.
            env.set("FDB_HOME", self.build_directory)
