# iostack: ecCodes as the stack builds it. Subclasses builtin; adds only what the stack needs.
from spack_repo.builtin.packages.eccodes.package import Eccodes as BuiltinEccodes

from spack.package import *


class Eccodes(BuiltinEccodes):
    """ecCodes (GRIB/BUFR), extended for iostack's sites."""
