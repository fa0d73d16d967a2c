# iostack: ecflow-light, the light ecFlow client OpenIFS 49r1 links against. No builtin recipe.
from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.iostack.craype import CrayPEPackage

from spack.package import *


class EcflowLight(CrayPEPackage, CMakePackage):
    """ecflow-light: a minimal ecFlow client library (C++ and Fortran) used by IFS/OpenIFS."""

    homepage = "https://github.com/ecmwf/ecflow-light"
    url = "https://github.com/ecmwf/ecflow-light/archive/refs/tags/1.0.2.tar.gz"
    git = "https://github.com/ecmwf/ecflow-light.git"

    license("Apache-2.0")

    # The version the OpenIFS 49r1 bundle pins: GitHub's tag archive, whose sha256 is its file
    # name in the offline source mirror (its README says how it is known).
    version("1.0.2", sha256="83c115b9ef91a3c2b5c7e0faf564293547e98e87c4023479baa18b5cd84ad6cc")

    # as its CMakeLists.txt and cmake/Dependencies.cmake ask
    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("fortran", type="build")
    depends_on("ecbuild@3.7:", type="build")
    depends_on("eckit@1.18:")

    def cmake_args(self):
        return [self.define("ENABLE_TESTS", self.run_tests)] + super().cmake_args()
