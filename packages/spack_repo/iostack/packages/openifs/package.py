# iostack: OpenIFS, ECMWF's openly licensed IFS (Apache-2.0), as [OIFS-HECToR] ran it with and
# without FDB output. No Spack recipe for it existed elsewhere.
import os

from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.iostack.craype import CrayPEPackage
from spack_repo.iostack.git_sources import GitSourcesPackage

from spack.package import *


class Openifs(GitSourcesPackage, CrayPEPackage, CMakePackage):
    """OpenIFS: the ECMWF Integrated Forecasting System for research and education.

    48r1 and later build ifs-source as an ecbuild/CMake project; the libraries the
    ecbundle bundle.yml would clone (ecCodes, eckit, fckit, metkit, FDB, atlas, multio,
    ecflow-light, FCM) come from Spack instead, so the build downloads nothing.
    43r3 built with FCM alone and is not published on GitHub: it is not offered here.
    """

    homepage = "https://openifs.ecmwf.int"
    git = "https://github.com/ecmwf-ifs/openifs.git"

    license("Apache-2.0")

    # The release: tag openifs-48r1.1.0 of github.com/ecmwf-ifs/openifs, at this commit.
    version("48r1.1.0", tag="openifs-48r1.1.0", commit="6c93ad58cdb9711b088e7af3025a5b6de3780697")
    # CY49R1: the repository's main branch at this commit (bundle.yml: ifs-bundle 49.1).
    version("49r1", commit="18ac98c6679fdb7591ca8fc75e6dafc822ebcdf3")
    # Each commit's tree by content (source_digest.py): `git archive --format=tar --prefix=src/
    # COMMIT | python3 source_digest.py -` on github.com/ecmwf-ifs/openifs; a mirror's tarball
    # of the commit must have it (git_sources.py).
    GIT_SOURCE_SHA256 = {
        "6c93ad58cdb9711b088e7af3025a5b6de3780697":
            "4e83ce5f254e4ba91d2a0a6c7d1355cb82f35aba82d4fd5aee38cff0456e7ef1",
        "18ac98c6679fdb7591ca8fc75e6dafc822ebcdf3":
            "d5200050571fa5c93123d62f8b36ef7f330d6afc6429271a544f115114228df9",
    }

    # ecbundle builds IFS with CMAKE_BUILD_TYPE=Bit, whose flags ifs-source's
    # cmake/compile_flags.cmake sets per compiler (gfortran: -g -O2); Debug is -O0.
    variant("build_type", default="Bit", values=("Bit", "Debug"), multi=False,
            description="CMake build type, as ifs-source's compile_flags.cmake defines them")
    variant("precision", default="single", values=("single", "double"), multi=False,
            description="Floating-point precision of ifsMASTER (SP or DP executable)")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("fortran", type="build")
    depends_on("fcm@2019.09.0", type="build")
    depends_on("python@3.6:", type="build")  # ecbuild_find_python(VERSION 3.6)

    # What ifs-source's CMakeLists.txt asks for, per release (the bundles pin exact versions,
    # which the site's environment chooses; see spack-env/templates/nwp.yaml). ifs-source
    # wants ecbuild 3.1, its contributed fiat and ectrans 3.4.
    depends_on("ecbuild@3.4:", type="build")
    depends_on("mpi")
    depends_on("lapack")
    # arpifs links NetCDF::NetCDF_Fortran whatever ENABLE_IFS_NETCDF says (cmake/arpifs.cmake)
    depends_on("netcdf-c")
    depends_on("netcdf-fortran")
    depends_on("eccodes+fortran")
    depends_on("eccodes@2:", when="@48r1.1.0")
    depends_on("eccodes@2.28:", when="@49r1")
    depends_on("eckit+mpi")
    depends_on("eckit@0.17:", when="@48r1.1.0")
    depends_on("fckit@0.5:", when="@48r1.1.0")
    depends_on("fckit")
    # FDB is REQUIRED at build time; writing to it or to GRIB files is the run-time namelist
    # switch LFDBOP
    depends_on("fdb@5:")
    depends_on("ecmwf-atlas@0.17.1:+fckit")
    depends_on("multio+fdb")
    depends_on("multio@0.3:", when="@48r1.1.0")
    # 49r1 links multio-fapi, multio's Fortran API since 2.0 (cmake: find_package(multio))
    depends_on("multio@2:+fortran", when="@49r1")
    depends_on("ecflow-light", when="@49r1")

    @property
    def root_cmakelists_dir(self):
        # ifs-source under the name the bundle gives it (bundle.yml: ifs_sp, ifs_dp), which
        # its CMakeLists.txt takes the project's name from: as `ifs`, the aliases it makes for
        # ifs-test (ifs-config*.cmake -> <project>-config*.cmake) linked to themselves, and
        # the install stopped at 'Too many levels of symbolic links'
        return f"ifs_{self.precision_suffix.lower()}"

    @run_before("cmake")
    def name_the_source_as_the_bundle_does(self):
        link = join_path(self.stage.source_path, self.root_cmakelists_dir)
        if not os.path.lexists(link):
            os.symlink("ifs-source", link)

    @when("@48r1.1.0")
    def patch(self):
        # ifs-source links ecbuild 2's ECCODES_LIBRARIES and ATLAS_LIBRARIES, which only the
        # bundle's own builds of ecCodes and atlas set: an installed package's config sets
        # them empty (ifsaux and the surf tools linked without libeccodes_f90). Set them to
        # the packages' CMake targets where empty.
        filter_file(
            r"^(ecbuild_add_option\(FEATURE ATLAS .*\))$",
            "\\1\n"
            "if(NOT ECCODES_LIBRARIES)\n  set(ECCODES_LIBRARIES eccodes_f90 eccodes)\nendif()\n"
            "if(HAVE_ATLAS AND NOT ATLAS_LIBRARIES)\n  set(ATLAS_LIBRARIES atlas_f)\nendif()",
            join_path("ifs-source", "CMakeLists.txt"))
        # MultIO's FDB sink registers itself when libmultio-fdb5 loads, and nothing calls into
        # it: ifs-source keeps it from --as-needed for static builds only, so a shared build
        # dropped it and ifsMASTER could not build an fdb5 sink ("No DataSinkFactory")
        filter_file(
            r"^( +)list\(APPEND MULTIO_LIBRARIES multio-fdb5\)$",
            "\\1list(APPEND MULTIO_LIBRARIES -Wl,--push-state,--no-as-needed multio-fdb5 "
            "-Wl,--pop-state)",
            join_path("ifs-source", "CMakeLists.txt"))
        # The analytic initial states (N3DINI=2) read no initial file, so they run with
        # NAMARG NSUPERSEDE=0; suarg.F90 tells IOSTREAM_MIX that it serves the IFS itself
        # (LDIFS_INTERNAL) only in its NSUPERSEDE=1 branch, and every GRIB field written to a
        # file or to FDB then stops in IO_PUT at 'GRIB HANDLE NOT DEFINED, NOT IFS'
        # (wroutgpgb/wroutspgb pass no handle; the IFS's sample templates are set up either
        # way). Say it in both branches.
        filter_file(
            r"^(!        2\.2   Information from initial conditions file)$",
            "\\1\nIF(NSUPERSEDE==0 .AND. NUCONF /= 901) "
            "CALL INI_IOSTREAM(KULOUT=NULOUT,LDIFS_INTERNAL=.TRUE.)",
            join_path("ifs-source", "arpifs", "setup", "suarg.F90"))

    def cmake_args(self):
        single = self.spec.satisfies("precision=single")
        # what bundle.yml passes to ifs_sp/ifs_dp, with its openifs-only option
        args = [
            self.define("ENABLE_SINGLE_PRECISION", single),
            self.define("ENABLE_OPENIFS_ONLY", True),
            self.define("ENABLE_FORECAST_ONLY", True),
            self.define("ENABLE_OOPS", False),
            self.define("ENABLE_AEOLUS", False),
            self.define("ENABLE_NEMO", False),
            self.define("ENABLE_SCMEC", False),
            self.define("ENABLE_OMP", True),
            self.define("ENABLE_IFS_NETCDF", True),
            self.define("ENABLE_MKL", False),
            self.define("FFTW_ENABLE_MKL", False),
            self.define("INSTALL_LIB_DIR", "lib"),
            self.define("ECBUILD_INSTALL_LIBRARY_HEADERS", False),
            self.define("ECBUILD_INSTALL_FORTRAN_MODULES", False),
            self.define("CMAKE_LINK_DEPENDS_NO_SHARED", True),
            self.define("FCM_EXECUTABLE", join_path(self.spec["fcm"].prefix.bin, "fcm")),
            # ifs-source calls ecbuild's macros before project(), as a bundle's top level
            # has loaded them: ecbuild's own config (share/ecbuild/cmake) loads them, its
            # plain package config (lib/cmake/ecbuild, which CMake finds first) does not
            self.define("ecbuild_DIR", self.spec["ecbuild"].prefix.share.ecbuild.cmake),
        ]
        if self.spec.satisfies("@48r1.1.0"):
            args += [self.define("ECBUILD_2_COMPAT", True),
                     self.define("ECBUILD_2_COMPAT_DEPRECATE", False)]
        return args + super().cmake_args()  # CrayPEPackage: the craype toolchain

    def flag_handler(self, name, flags):
        # ecCodes' Fortran modules through the compiler wrapper: ecbuild replaces
        # CMAKE_Fortran_FLAGS with the project's own flags (the compile lines lacked the one
        # given on the command line, and grib_api_interface.F90 stopped again)
        if name == "fflags":
            modules = self.eccodes_fortran_modules()
            if modules:
                flags = [*flags, f"-I{modules}"]
        return (flags, None, None)

    def eccodes_fortran_modules(self):
        """The directory of ecCodes' Fortran modules (grib_api.mod), where its CMake targets do
        not say it: Debian installs them in lib/<triplet>/fortran/gfortran-mod-N/ and its
        eccodes_f90 target names include/ only (ifsaux's grib_api_interface.F90 stopped at
        'Cannot open module file grib_api.mod'). None where include/ has them."""
        import glob

        prefix = self.spec["eccodes"].prefix
        if os.path.exists(join_path(prefix, "include", "grib_api.mod")):
            return None
        # Debian's compatibility names (x86_64-linux-gnu-gfortran-N) link to the one directory
        found = sorted({os.path.dirname(os.path.realpath(f)) for f in glob.glob(
            join_path(prefix, "lib", "*", "fortran", "*", "grib_api.mod"))})
        return found[-1] if found else None

    @run_after("install")
    def install_run_scripts(self):
        # The experiment run scripts (oifs-run, exp-config.h, job wrappers), the platform
        # config the OIFS_* variables come from, and ifs-test (its cases, storage.yaml),
        # which OpenifsCheck runs (reframe-tests/checks/openifs.py)
        source = self.stage.source_path
        for subdir in ("scripts", "arch", "ifs-test"):
            if os.path.isdir(join_path(source, subdir)):
                install_tree(join_path(source, subdir), join_path(self.prefix.share.openifs, subdir))
        if os.path.exists(join_path(source, "oifs-config.edit_me.sh")):
            install(join_path(source, "oifs-config.edit_me.sh"), self.prefix.share.openifs)

    @property
    def precision_suffix(self):
        return "SP" if self.spec.satisfies("precision=single") else "DP"

    def setup_run_environment(self, env: EnvironmentModifications) -> None:
        # What OpenIFS's run scripts read (docs/oifs_env_vars.md).
        env.set("OIFS_HOME", self.prefix.share.openifs)
        env.set("OIFS_CYCLE", str(self.version).split(".")[0])  # the cycle: 48r1, 49r1
        env.set("OIFS_EXEC", join_path(self.prefix.bin, f"ifsMASTER.{self.precision_suffix}"))
        env.set("OIFS_TEST", join_path(self.prefix.share.openifs, "scripts", "build_test"))
        env.set("OIFS_RUN_SCRIPT", join_path(self.prefix.share.openifs, "scripts", "exp_3d"))
