# iostack: ecbuild as the stack builds it. Subclasses builtin; adds only what the stack needs.
from spack_repo.builtin.packages.ecbuild.package import Ecbuild as BuiltinEcbuild

from spack.package import *


class Ecbuild(BuiltinEcbuild):
    """ecBuild, extended for iostack's sites."""

    # OpenIFS 49r1's bundle pins 3.8.5, and multio 2.x asks for 3.8 (builtin stops at 3.7.2).
    # GitHub's tag archive; its sha256 is its file name in the offline source mirror (README).
    version("3.8.5", sha256="aa0c44cab0fffec4c0b3542e91ebcc736b3d41b68a068d30c023ec0df5f93425")
