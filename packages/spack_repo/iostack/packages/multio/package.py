# iostack: multio, ECMWF's I/O server and output pipelines, required by OpenIFS 49r1.
from spack_repo.builtin.build_systems.cmake import CMakePackage

from spack.package import *


class Multio(CMakePackage):
    """multio: ECMWF's message-based output pipelines (FDB, files) used by IFS/OpenIFS.

    The OpenIFS 49r1 bundle pins multio 2.2.2, but no checksum or commit of that release
    could be had from a published source here. Sites that run OpenIFS provide 2.2.2 as an
    external; the one version below is a full commit of github.com/ecmwf/multio (not a
    release), so the recipe stays buildable. Add 2.2.2 with its sha256 once one is published."""

    homepage = "https://github.com/ecmwf/multio"
    git = "https://github.com/ecmwf/multio.git"

    license("Apache-2.0")

    version("027d274", commit="027d2746320ef746dbbad22c673a37d96807f5f8")

    variant("fdb", default=True, description="FDB5 output")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("fortran", type="build")
    depends_on("ecbuild", type="build")
    depends_on("eckit")
    depends_on("metkit")
    depends_on("eccodes")
    depends_on("fdb", when="+fdb")
