# iostack: nvme-stage, the node-local NVMe staging tool for OpenFOAM runs ([OCI-OpenFOAM]).
from spack_repo.builtin.build_systems.generic import Package
from spack_repo.iostack.in_repo import checked_source

from spack.package import *


class NvmeStage(Package):
    """Stage an OpenFOAM case between shared storage and node-local NVMe with rsync:
    shared to the head node, head to every node in parallel, each node's own
    processor* dirs back to the head, and post-processing files back to shared.
    A bash script meant to be called from Slurm batch scripts."""

    homepage = "https://github.com/iostack/iostack"

    maintainers("iostack")
    license("Apache-2.0")

    # Nothing to download: the script is in the same repository as this recipe, so the
    # iostack commit pins it and no sha256 exists. The version must equal the script's
    # VERSION (checked at install).
    has_code = False
    version("1.1.0")
    # sha256 of src/nvme-stage per version (in_repo.tree_sha256): a changed source needs a new one
    SOURCE_SHA256 = {"1.1.0": "7245feafc84ad6046da3b1e0a9eb2fc8b63a27cb5580bf36ce48753ac994b3a4"}

    depends_on("rsync", type="run")
    # bash >= 4.4 (inherit_errexit, namerefs) is taken from the system, like ssh and
    # scontrol, which it calls.

    def install(self, spec, prefix):
        source = checked_source(self, "nvme-stage", "nvme-stage", r"^readonly VERSION=(\S+)$",
                                self.SOURCE_SHA256)
        mkdirp(prefix.bin)
        install(join_path(source, "nvme-stage"), prefix.bin)
        set_executable(join_path(prefix.bin, "nvme-stage"))

    def test_version(self):
        """reports the recipe's version (`spack test run`; the nightly's smoke check)"""
        stage = which(self.prefix.bin.join("nvme-stage"))
        out = stage("--version", output=str.split, error=str.split)
        assert out.strip() == f"nvme-stage {self.spec.version}", out

    def setup_run_environment(self, env):
        # rsync of this build, before whatever the login node has; an external one is the
        # system's (on Debian /usr/bin, which must not go before what Spack built: it
        # would put Debian's fdb-info before FDB 5.13's)
        if not self.spec["rsync"].external:
            env.prepend_path("PATH", self.spec["rsync"].prefix.bin)
