# iostack: FCM, the Fortran build system OpenIFS's ifs-source calls (FCM_EXECUTABLE).
from spack_repo.builtin.build_systems.generic import Package

from spack.package import *


class Fcm(Package):
    """FCM (Flexible Configuration Management), needed to build OpenIFS."""

    homepage = "https://github.com/metomi/fcm"
    url = "https://github.com/metomi/fcm/archive/refs/tags/2019.09.0.tar.gz"

    license("GPL-3.0-or-later")

    # The version the OpenIFS 49r1 bundle pins; sha256 as published in a public Spack recipe
    # for the GitHub tag archive.
    version("2019.09.0", sha256="0c291c652d6d2827a789cc326d9f2e3b2daa2a10aae7faa72d2fad3fd8a650c2")

    depends_on("perl", type="run")

    def install(self, spec, prefix):
        install_tree(".", prefix)
