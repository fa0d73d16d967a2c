# iostack: metkit as the stack builds it. Subclasses builtin; adds only what the stack needs.
from spack_repo.builtin.packages.metkit.package import Metkit as BuiltinMetkit
from spack_repo.iostack.craype import CRAYPE_DESCRIPTION, CRAYPE_VALUES, craype_cmake_args

from spack.package import *


class Metkit(BuiltinMetkit):
    """metkit, extended for iostack's sites."""

    # OpenIFS 49r1 pins metkit 1.11.19, for which no published checksum could be had here.
    # 1.11.22 is the 1.11.x with one (spack-packages commit 4aa3eb3a29, PR #3973).
    version("1.11.22", sha256="e2a2ea1532f9e187e37b807dbf35cd09325b2aef29bd5117203d57ba2e65a0d6", preferred=True)

    # its CMakeLists.txt asks for ecbuild 3.7.2 (builtin says 3.4:, which Debian's 3.7.1 meets)
    depends_on("ecbuild@3.7.2:", type="build", when="@1.11.22:")
    # its CMake project enables C as well as C++ (builtin declares only cxx, so Spack's
    # compiler wrapper gives it no C compiler and configure stops at "C compiler broken")
    depends_on("c", type="build")

    variant("craype", default="none", values=CRAYPE_VALUES, multi=False,
            description=CRAYPE_DESCRIPTION)

    def cmake_args(self):
        return super().cmake_args() + craype_cmake_args(self)
