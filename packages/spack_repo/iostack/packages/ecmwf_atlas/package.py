# iostack: atlas as the stack builds it. Subclasses builtin; adds only what the stack needs.
from spack_repo.builtin.packages.ecmwf_atlas.package import EcmwfAtlas as BuiltinEcmwfAtlas

from spack.package import *


class EcmwfAtlas(BuiltinEcmwfAtlas):
    """atlas, extended for iostack's sites."""

    # OpenIFS 49r1's bundle pins 0.44.0 (builtin stops at 0.40.0). GitHub's tag archive; its
    # sha256 is its file name in the offline source mirror (README).
    version("0.44.0", sha256="d5b7b444fa5b7b917ca372cc599740b35822a8ddce9526532da9454c35f9b20c")

    # builtin asks for Boost from 0.34 on, but atlas's CMake looks for Boost only for the
    # tesselation feature (cmake/features/TESSELATION.cmake), which the OpenIFS bundles turn
    # off; so Boost is a dependency of +tesselation only (0.34 has no such variant: none).
    depends_on("boost cxxstd=17 visibility=hidden", when="@0.35: +tesselation",
               type=("build", "run"))


# Spack has no directive that withdraws a dependency a base recipe declares: this one goes.
for _when, _deps in list(EcmwfAtlas.dependencies.items()):
    if "boost" in _deps and not _when.satisfies("+tesselation"):
        del _deps["boost"]
