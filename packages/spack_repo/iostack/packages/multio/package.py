# iostack: multio, ECMWF's I/O server and output pipelines, required by OpenIFS 49r1.
from spack_repo.builtin.build_systems.cmake import CMakePackage

from spack.package import *


class Multio(CMakePackage):
    """multio: ECMWF's message-based output pipelines (FDB, files) used by IFS/OpenIFS.

    No release checksum or release commit of multio could be had from a published source
    here, so this recipe declares no version and builds nothing: a site provides multio as an
    external (the version the OpenIFS bundle pins is 2.2.2). Add a version with its sha256
    once one is published."""

    homepage = "https://github.com/ecmwf/multio"
    git = "https://github.com/ecmwf/multio.git"

    license("Apache-2.0")

    variant("fdb", default=True, description="FDB5 output")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("fortran", type="build")
    depends_on("ecbuild", type="build")
    depends_on("eckit")
    depends_on("metkit")
    depends_on("eccodes")
    depends_on("fdb", when="+fdb")
