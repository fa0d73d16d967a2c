# iostack: metkit as the stack builds it. Subclasses builtin; adds only what the stack needs.
from spack_repo.builtin.packages.metkit.package import Metkit as BuiltinMetkit

from spack.package import *


class Metkit(BuiltinMetkit):
    """metkit, extended for iostack's sites."""
