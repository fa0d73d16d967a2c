# iostack: eckit as the stack builds it. Subclasses builtin; adds only what the stack needs.
from spack_repo.builtin.packages.eckit.package import Eckit as BuiltinEckit

from spack.package import *


class Eckit(BuiltinEckit):
    """eckit, extended for iostack's sites."""
