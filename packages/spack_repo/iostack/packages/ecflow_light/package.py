# iostack: ecflow-light, the light ecFlow client OpenIFS 49r1 links against.
from spack_repo.builtin.build_systems.cmake import CMakePackage

from spack.package import *


class EcflowLight(CMakePackage):
    """ecflow-light: a minimal ecFlow client library (C++ and Fortran) used by IFS/OpenIFS.

    The OpenIFS 49r1 bundle pins 1.0.2, but no checksum or commit of that release could be
    had from a published source here. Sites that run OpenIFS provide 1.0.2 as an external;
    the one version below is a full commit of github.com/ecmwf/ecflow-light (not a release).
    Add 1.0.2 with its sha256 once one is published."""

    homepage = "https://github.com/ecmwf/ecflow-light"
    git = "https://github.com/ecmwf/ecflow-light.git"

    license("Apache-2.0")

    version("0489054", commit="0489054b85d36dd7383f5190336472d9177cda26")

    depends_on("cxx", type="build")
    depends_on("fortran", type="build")
    depends_on("ecbuild@3.7:", type="build")
    depends_on("eckit")
