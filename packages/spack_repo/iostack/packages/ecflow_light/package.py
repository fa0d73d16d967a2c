# iostack: ecflow-light, the light ecFlow client OpenIFS 49r1 links against.
from spack_repo.builtin.build_systems.cmake import CMakePackage

from spack.package import *


class EcflowLight(CMakePackage):
    """ecflow-light: a minimal ecFlow client library (C++ and Fortran) used by IFS/OpenIFS.

    No release checksum or release commit could be had from a published source here, so this
    recipe declares no version: a site provides it as an external (the OpenIFS 49r1 bundle
    pins 1.0.2). Add a version with its sha256 once one is published."""

    homepage = "https://github.com/ecmwf/ecflow-light"
    git = "https://github.com/ecmwf/ecflow-light.git"

    license("Apache-2.0")

    depends_on("cxx", type="build")
    depends_on("fortran", type="build")
    depends_on("ecbuild@3.7:", type="build")
    depends_on("eckit")
