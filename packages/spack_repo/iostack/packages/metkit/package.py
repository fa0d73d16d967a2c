# iostack: metkit as the stack builds it. Subclasses builtin; adds only what the stack needs.
from spack_repo.builtin.packages.metkit.package import Metkit as BuiltinMetkit
from spack_repo.iostack.craype import CrayPEPackage

from spack.package import *


class Metkit(CrayPEPackage, BuiltinMetkit):
    """metkit, extended for iostack's sites."""

    # OpenIFS 49r1 pins metkit 1.11.19, for which no published checksum could be had here.
    # 1.11.22 is the 1.11.x with one (spack-packages commit 4aa3eb3a29, PR #3973).
    version("1.11.22", sha256="e2a2ea1532f9e187e37b807dbf35cd09325b2aef29bd5117203d57ba2e65a0d6", preferred=True)
