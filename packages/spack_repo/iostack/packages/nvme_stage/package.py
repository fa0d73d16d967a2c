# iostack: nvme-stage, the node-local NVMe staging tool for OpenFOAM runs ([OCI-OpenFOAM]).
from spack_repo.builtin.build_systems.generic import Package
from spack_repo.iostack.in_repo import InRepoPackage

from spack.package import *


class NvmeStage(InRepoPackage, Package):
    """Stage an OpenFOAM case between shared storage and node-local NVMe with rsync:
    shared to the head node, head to every node in parallel, each node's own
    processor* dirs back to the head, and post-processing files back to shared.
    A bash script meant to be called from Slurm batch scripts."""

    # The script is beside this recipe (src/, in_repo.py); its VERSION must be the version.
    version_file = "nvme-stage"
    version_pattern = r"^readonly VERSION=(\S+)$"
    version("1.1.0")
    # sha256 of src/ per version (iostack.core.digest.tree_sha256): a changed source needs a new one
    SOURCE_SHA256 = {"1.1.0": "fb936bd878794bc170db578583b00e72ad5b0e987cf13cce1efd16d75728c387"}

    depends_on("rsync", type="run")
    # bash >= 4.4 (inherit_errexit, namerefs) is taken from the system, like ssh and
    # scontrol, which it calls.

    def install(self, spec, prefix):
        source = self.checked_source()
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
