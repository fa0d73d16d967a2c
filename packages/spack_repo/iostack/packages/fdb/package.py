# iostack: FDB5 as the stack builds it. Subclasses builtin; adds only what the stack needs.
# FDB tunables (async write, buffer sizes, sync on flush, Lustre striping of roots) are
# run-time settings of FDB's config and environment: none is baked in here.
from spack_repo.builtin.packages.fdb.package import Fdb as BuiltinFdb
from spack_repo.iostack.craype import CrayPEPackage

from spack.package import *


class Fdb(CrayPEPackage, BuiltinFdb):
    """FDB5 (Fields DataBase), extended for iostack's sites."""

    # OpenIFS 49r1 pins FDB 5.13.0, for which no published checksum could be had here.
    # 5.13.106 is the 5.13.x with one (spack-packages commit 4aa3eb3a29, PR #3973).
    # Lustre sites select the builtin variant backends=lustre in their packages.yaml.
    version("5.13.106", sha256="34c7ee498f7511f5255ffcfd94bee51264c6e4892063e2c2a172f2a4fd86062d", preferred=True)
