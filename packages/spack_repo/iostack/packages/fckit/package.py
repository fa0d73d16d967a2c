# iostack: fckit as the stack builds it. Subclasses builtin; adds only what the stack needs.
from spack_repo.builtin.packages.fckit.package import Fckit as BuiltinFckit

from spack.package import *


class Fckit(BuiltinFckit):
    """fckit, extended for iostack's sites."""

    # its CMakeLists.txt says project( fckit LANGUAGES C CXX Fortran ), but builtin declares
    # only cxx and fortran, so Spack's compiler wrapper gives it no C compiler and configure
    # stops at "C compiler broken" (as metkit's did)
    depends_on("c", type="build")
