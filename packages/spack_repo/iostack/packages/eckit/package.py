# iostack: eckit as the stack builds it. Subclasses builtin; adds only what the stack needs.
from spack_repo.builtin.packages.eckit.package import Eckit as BuiltinEckit
from spack_repo.iostack.craype import CrayPEPackage
from spack_repo.iostack.upstream_tests import UpstreamTestsPackage

from spack.package import *


class Eckit(UpstreamTestsPackage, CrayPEPackage, BuiltinEckit):
    """eckit, extended for iostack's sites."""

    # OpenIFS 49r1 pins eckit 1.28.0, for which no published checksum could be had here.
    # 1.28.8 is the newest 1.28.x with one (builtin's recipe from spack-packages commit
    # 4aa3eb3a29afaaf9b638b1ca5998fee2ec0fe7cf, #3973, first released in v2026.06.0);
    # builtin already carries 1.28.3 and 1.28.2.
    version("1.28.8", sha256="4bd4fbb971ec9b53a64d47f40336c130b37349850ae82114d5c04f393ea70d23")
