# iostack: one module for [OIFS-HECToR]'s NWP stack.
from spack_repo.builtin.build_systems.bundle import BundlePackage

from spack.package import *


class NwpEnv(BundlePackage):
    """NWP application stack of [OIFS-HECToR]: ecCodes, eckit, metkit, FDB and OpenIFS.
    Its module loads them all."""

    homepage = "https://github.com/ecmwf-ifs/openifs"

    version("1.0")

    variant("openifs", default=True, description="Include OpenIFS itself")

    depends_on("eccodes+fortran", type="run")
    depends_on("eckit", type="run")
    depends_on("metkit", type="run")
    depends_on("fdb+tools", type="run")
    depends_on("openifs", type="run", when="+openifs")
    depends_on("multio+fdb", type="run", when="+openifs")
