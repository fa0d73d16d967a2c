# iostack: OpenIFS, ECMWF's openly licensed IFS (Apache-2.0), as seed 000 ran it with and
# without FDB output. No Spack recipe for it existed elsewhere.
import os

from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.iostack.craype import CrayPEPackage

from spack.package import *


class Openifs(CrayPEPackage, CMakePackage):
    """OpenIFS: the ECMWF Integrated Forecasting System for research and education.

    48r1 and later build ifs-source as an ecbuild/CMake project; the libraries the
    ecbundle bundle.yml would clone (ecCodes, eckit, fckit, metkit, FDB, atlas, multio,
    ecflow-light, FCM) come from Spack instead, so the build downloads nothing.
    43r3 built with FCM alone and is not published on GitHub: it is not offered here.
    """

    homepage = "https://openifs.ecmwf.int"
    git = "https://github.com/ecmwf-ifs/openifs.git"

    license("Apache-2.0")

    # Full commit of github.com/ecmwf-ifs/openifs at which bundle.yml declares ifs-bundle 49.1
    # (ecCodes 2.38.3, eckit 1.28.0, fckit 0.13.1, metkit 1.11.19, FDB 5.13.0, atlas 0.39.0,
    # multio 2.2.2, ecbuild 3.8.5, FCM 2019.09.0).
    version("49r1", commit="90d06176c0a4ffd6b3941cfe3bb4cd426e364e51")

    root_cmakelists_dir = "ifs-source"

    variant("precision", default="single", values=("single", "double"), multi=False,
            description="Floating-point precision of ifsMASTER (SP or DP executable)")
    variant("fdb", default=True,
            description="FDB output (namelist LFDBOP=T, seed 000); GRIB files otherwise")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("fortran", type="build")
    # ifs-source asks for ecbuild 3.1+; the bundle uses 3.8.5, builtin has up to 3.7.2.
    depends_on("ecbuild@3.7:", type="build")
    depends_on("fcm@2019.09.0", type="build")
    depends_on("python@3.8:", type=("build", "run"))

    depends_on("mpi")
    depends_on("lapack")
    depends_on("hdf5+fortran+hl+mpi")
    depends_on("netcdf-c")
    depends_on("netcdf-fortran")

    depends_on("eccodes@2.38:+fortran")
    depends_on("eckit@1.28:+mpi")
    depends_on("fckit@0.13:")
    depends_on("metkit@1.11:")
    depends_on("fdb@5.13:", when="+fdb")
    depends_on("ecmwf-atlas@0.39:+fckit")
    depends_on("multio")
    depends_on("multio+fdb", when="+fdb")
    depends_on("ecflow-light")

    def cmake_args(self):
        single = self.spec.satisfies("precision=single")
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
            self.define("FCM_EXECUTABLE", join_path(self.spec["fcm"].prefix.bin, "fcm")),
        ]
        return args + super().cmake_args()  # CrayPEPackage: the craype toolchain

    @run_after("install")
    def install_run_scripts(self):
        # The experiment run scripts (oifs-run, exp-config.h, job wrappers) and the
        # platform config the OIFS_* variables come from.
        for subdir in ("scripts", "arch"):
            if os.path.isdir(subdir):
                install_tree(subdir, join_path(self.prefix.share.openifs, subdir))
        if os.path.exists("oifs-config.edit_me.sh"):
            install("oifs-config.edit_me.sh", self.prefix.share.openifs)

    @property
    def precision_suffix(self):
        return "SP" if self.spec.satisfies("precision=single") else "DP"

    def setup_run_environment(self, env: EnvironmentModifications) -> None:
        # What OpenIFS's run scripts read (docs/oifs_env_vars.md).
        env.set("OIFS_HOME", self.prefix.share.openifs)
        env.set("OIFS_CYCLE", str(self.version))
        env.set("OIFS_EXEC", join_path(self.prefix.bin, f"ifsMASTER.{self.precision_suffix}"))
        env.set("OIFS_TEST", join_path(self.prefix.share.openifs, "scripts", "build_test"))
        env.set("OIFS_RUN_SCRIPT", join_path(self.prefix.share.openifs, "scripts", "exp_3d"))
