# iostack: OpenFOAM (ESI), builtin recipe used as is; v2312 is [OCI-OpenFOAM]'s version.
from spack_repo.builtin.packages.openfoam.package import Openfoam as BuiltinOpenfoam

from spack.package import *


class Openfoam(BuiltinOpenfoam):
    """OpenFOAM (ESI/openfoam.com), as builtin, refusing the Cray compiler with a message
    that says what to use instead."""

    conflicts(
        "%cce",
        msg="OpenFOAM is not built with the Cray compiler (CCE) in iostack: load PrgEnv-gnu "
        "and build it %gcc (on cray-ex: `spack install openfoam %gcc`)",
    )
