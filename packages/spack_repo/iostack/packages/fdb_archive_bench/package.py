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
    # 1.1.0: the raw path (--path raw), resource counters, FDB_HOME's resource file,
    # fdb-archive-profile
    version("1.1.0")
    # sha256 of src/ per version (iostack.core.digest.tree_sha256): a changed source needs a new one
    SOURCE_SHA256 = {"1.1.0": "43c13959bdbca46023ec3e4d9b0c5299bc7cbb3e43c85cc67beffc49e649ba76"}

    depends_on("cxx", type="build")
    depends_on("cmake@3.18:", type="build")
    # FDB's package config brings eckit and metkit; ecCodes encodes the fields
    depends_on("fdb")
    depends_on("eccodes")

    @run_before("cmake")
    def copy_in_repo_source(self):
        self.stage_in_repo_source()

    def test_archive_and_verify(self):
        """4 fields archived with their keys into a new FDB, each read back byte for byte
        (`spack test run`; the nightly's smoke check runs it on a release)"""
        import os

        fdb = self.spec["fdb"].prefix
        schema = next((s for s in (join_path(fdb, "etc", "fdb", "schema"),
                                   join_path(fdb, "share", "fdb", "schema"), "/etc/fdb/schema")
                       if os.path.isfile(s)), None)
        assert schema, f"no FDB schema under {fdb}"
        mkdirp("root")
        with open("config.yaml", "w") as f:
            f.write(f"type: local\nengine: toc\nschema: {schema}\n"
                    f"spaces:\n- roots:\n  - path: {os.path.abspath('root')}\n")
        os.environ["FDB5_CONFIG_FILE"] = os.path.abspath("config.yaml")
        eccodes = self.spec["eccodes"].prefix
        grib_set = which(eccodes.bin.grib_set) or which("grib_set")
        samples = join_path(eccodes, "share", "eccodes", "samples", "GRIB2.tmpl")
        # an ensemble member on pressure level 1, as fdb-hammer's template
        grib_set("-s", "setLocalDefinition=1,localDefinitionNumber=1,class=od,expver=0001,"
                 "productDefinitionTemplateNumber=1,type=pf,stream=enfo,number=1,"
                 "typeOfFirstFixedSurface=100,level=1", samples, "template.grib")
        bench = which(self.prefix.bin.join("fdb-archive-bench"))
        args = ["--template", "template.grib", "--nsteps", "2", "--nparams", "2"]
        out = bench(*args, "--path", "key", output=str.split, error=str.split)
        assert "Fields written: 4" in out, out
        out = bench("--verify", *args, output=str.split, error=str.split)
        for line in ("Fields verified: 4", "Verify mismatches: 0", "Key mismatches: 0"):
            assert line in out, out
