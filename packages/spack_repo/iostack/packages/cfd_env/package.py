# iostack: one module for [OCI-OpenFOAM]'s CFD stack.
from spack_repo.builtin.build_systems.bundle import BundlePackage

from spack.package import *


class CfdEnv(BundlePackage):
    """CFD application stack of [OCI-OpenFOAM]: OpenFOAM and the NVMe staging tool."""

    homepage = "https://www.openfoam.com"

    version("1.0")

    depends_on("openfoam", type="run")
    depends_on("nvme-stage", type="run")
