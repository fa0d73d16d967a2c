# iostack: nvme-stage, the node-local NVMe staging tool for OpenFOAM runs (seed 003).
import os
import re

from spack_repo.builtin.build_systems.generic import Package

from spack.package import *

# The script is this repository's src/nvme-stage: package.py sits at
# packages/spack_repo/iostack/packages/nvme_stage/, five levels below the root.
IN_REPO_SOURCE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), *[os.pardir] * 5, "src", "nvme-stage"
)


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
    version("1.0.0")

    depends_on("rsync", type="run")
    # bash >= 4.4 (inherit_errexit, namerefs) is taken from the system, like ssh and
    # scontrol, which it calls.

    def install(self, spec, prefix):
        script = os.path.join(IN_REPO_SOURCE, "nvme-stage")
        if not os.path.isfile(script):
            raise InstallError(f"nvme-stage not found at {script}")
        with open(script) as f:
            declared = re.search(r"^readonly VERSION=(\S+)$", f.read(), re.M)
        if not declared or declared.group(1) != str(spec.version):
            raise InstallError(
                f"{script} is version {declared and declared.group(1)}, "
                f"recipe installs {spec.version}: update the recipe's version()"
            )
        mkdirp(prefix.bin)
        install(script, prefix.bin)
        set_executable(join_path(prefix.bin, "nvme-stage"))

    def setup_run_environment(self, env):
        # rsync of this build, before whatever the login node has
        env.prepend_path("PATH", self.spec["rsync"].prefix.bin)
