# iostack: eccodes as the stack builds it. Subclasses builtin; adds only what the stack needs.
from spack_repo.builtin.packages.eccodes.package import Eccodes as BuiltinEccodes
from spack_repo.iostack.craype import CrayPEPackage

from spack.package import *


class Eccodes(CrayPEPackage, BuiltinEccodes):
    """ecCodes (GRIB/BUFR), extended for iostack's sites."""

    # The OpenIFS 49r1 bundle (ecmwf-ifs/openifs bundle.yml) pins ecCodes 2.38.3.
    # sha256 published in builtin's recipe from spack-packages commit
    # 4aa3eb3a29afaaf9b638b1ca5998fee2ec0fe7cf, #3973, first released in v2026.06.0, same URL
    # scheme.
    version("2.38.3", sha256="fa7b7ffb22973ed1dfbeb208c042a67a805ab070f1288a0f1f0707a1020d1c81")
