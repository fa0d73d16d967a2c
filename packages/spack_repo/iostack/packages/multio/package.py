# iostack: multio, ECMWF's I/O server library and output pipelines, which OpenIFS links
# (48r1.1.0's bundle pins 1.5.1, 49r1's 2.2.2). No builtin recipe exists.
from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.iostack.craype import CrayPEPackage

from spack.package import *


class Multio(CrayPEPackage, CMakePackage):
    """multio: ECMWF's message-based output pipelines (FDB, files) used by IFS/OpenIFS, and
    its tools: multio-replay (1.x) and multio-feed (2.x) push GRIB through a plan into FDB,
    multio-hammer generates an I/O server's load."""

    homepage = "https://github.com/ecmwf/multio"
    url = "https://github.com/ecmwf/multio/archive/refs/tags/2.2.2.tar.gz"
    git = "https://github.com/ecmwf/multio.git"

    license("Apache-2.0")

    # GitHub's tag archives (`git archive --prefix=multio-TAG/ TAG | gzip -n`); their sha256
    # is the file name of the archive in the offline source mirror (its README says how).
    version("2.2.2", sha256="82da7a4111066d40200829ffd3976b93df5e9795d7eaebef1ec90e4dd2f6a742")
    version("1.5.1", sha256="994c9060a606a04955bf61bfa88515a0a23298a7ac67d46cbb658f1d0244f9c6")

    variant("fdb", default=True, description="FDB5 sink (feature FDB5)")
    # 1.x builds its tools (multio-replay, multio-hammer, ...) only with the MPI server
    variant("server", default=True, when="@1",
            description="multio-server and the command-line tools (needs eckit+mpi)")
    variant("fortran", default=True, when="@2",
            description="Fortran API (multio-fapi, which OpenIFS 49r1 links) and examples")

    # Each as multio's CMakeLists.txt asks (ecbuild_find_package), no tighter.
    depends_on("cxx", type="build")
    # 1.5.1's configure detects a C compiler too (Spack's wrapper, given none, fails "C
    # compiler identification is unknown")
    depends_on("c", type="build")
    depends_on("fortran", type="build", when="+fortran")
    depends_on("fortran", type="build", when="+server")
    depends_on("ecbuild@3.4:", type="build", when="@1")
    depends_on("ecbuild@3.8:", type="build", when="@2")
    depends_on("eccodes@2.18:", when="@1")
    depends_on("eccodes@2.31.2:", when="@2")
    depends_on("eckit@1.16:", when="@1")
    depends_on("eckit@1.24:", when="@2")
    depends_on("eckit+mpi", when="+server")
    depends_on("mpi", when="+server")
    depends_on("metkit@1.7:+grib", when="@1")
    depends_on("metkit@1.10:+grib", when="@2")
    depends_on("ecmwf-atlas@0.35:", when="@2")
    depends_on("fckit@0.10.0:", when="+fortran")
    depends_on("fdb@5:", when="@1+fdb")
    depends_on("fdb@5.11.20:", when="@2+fdb")

    # 1.5.1 against eckit 1.20 and later (the bundle pins 1.18.8): the timing API it uses
    # became private (the patch says how it is adapted)
    patch("eckit-1.20-autotiming.patch", when="@1.5.1 ^eckit@1.20:")

    @when("@1")
    def patch(self):
        # 1.5.1 is built inside the IFS bundle, whose top project enables every language
        # and whose eckit (1.18) was C++11 code. Built alone against the stack's eckit:
        # eckit 1.28's headers are C++17, and the server's Fortran library
        # (multio-server-fapi) needs Fortran enabled in multio's own project.
        if self.spec.satisfies("^eckit@1.28:"):
            filter_file(r"set\(CMAKE_CXX_STANDARD 11\)", "set(CMAKE_CXX_STANDARD 17)",
                        "CMakeLists.txt")
        if self.spec.satisfies("+server"):
            filter_file(r"project\( multio LANGUAGES CXX \)",
                        "project( multio LANGUAGES C CXX Fortran )", "CMakeLists.txt")

    def cmake_args(self):
        args = [self.define_from_variant("ENABLE_FDB5", "fdb"),
                self.define("ENABLE_TESTS", self.run_tests)]
        if self.spec.satisfies("@1"):
            args.append(self.define_from_variant("ENABLE_MULTIO_SERVER", "server"))
            if self.spec.satisfies("+fdb"):
                # the FDB sink registers itself when libmultio-fdb5 loads, but nothing
                # calls into it: a linker that drops unused libraries (Debian 12's does by
                # default) leaves it out of multio-sink and multio-hammer ("No
                # DataSinkFactory called fdb5"); OpenIFS links it --no-as-needed too
                args += [self.define("CMAKE_EXE_LINKER_FLAGS", "-Wl,--no-as-needed"),
                         self.define("CMAKE_SHARED_LINKER_FLAGS", "-Wl,--no-as-needed")]
        else:
            # optional features whose libraries the stack does not build
            args += [self.define_from_variant("ENABLE_FORTRAN", "fortran"),
                     self.define("ENABLE_MIR", False), self.define("ENABLE_ATLAS_IO", False)]
        return args + super().cmake_args()  # CrayPEPackage: the craype toolchain
