# iostack: FDB5 as the stack builds it. Subclasses builtin; adds only what the stack needs.
# FDB tunables (async write, buffer sizes, sync on flush, Lustre striping of roots) are
# run-time settings of FDB's config and environment: none is baked in here.
from spack_repo.builtin.packages.fdb.package import Fdb as BuiltinFdb

from spack.package import *


class Fdb(BuiltinFdb):
    """FDB5 (Fields DataBase), extended for iostack's sites."""
