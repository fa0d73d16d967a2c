# iostack: metkit as the stack builds it. Subclasses builtin; adds only what the stack needs.
import os

from spack_repo.builtin.packages.metkit.package import Metkit as BuiltinMetkit
from spack_repo.iostack.craype import CrayPEPackage
from spack_repo.iostack.upstream_tests import UpstreamTestsPackage

from spack.package import *


class Metkit(UpstreamTestsPackage, CrayPEPackage, BuiltinMetkit):
    """metkit, extended for iostack's sites."""

    # OpenIFS 49r1 pins metkit 1.11.19, for which no published checksum could be had here.
    # 1.11.22 is the 1.11.x with one (builtin's recipe from spack-packages commit
    # 4aa3eb3a29afaaf9b638b1ca5998fee2ec0fe7cf, #3973, first released in v2026.06.0).
    version("1.11.22", sha256="e2a2ea1532f9e187e37b807dbf35cd09325b2aef29bd5117203d57ba2e65a0d6")

    # decoding a GRIB message's key evaluates paramId once, not twice (FDB's message path;
    # iostack issue 26: the patch's header says why, docs/fdb-performance.md measures it)
    patch("metkit-1.11.22-paramid-once.patch", when="@1.11.22")

    # its CMakeLists.txt asks for ecbuild 3.7.2 (builtin says 3.4:, which Debian's 3.7.1 meets)
    depends_on("ecbuild@3.7.2:", type="build", when="@1.11.22:")
    # its CMake project enables C as well as C++ (builtin declares only cxx, so Spack's
    # compiler wrapper gives it no C compiler and configure stops at "C compiler broken")
    depends_on("c", type="build")

    OFFLINE_EXCLUDED = {
        "grib_get_data": "downloads its GRIB files from ECMWF's test-data server at test time",
        "metkit_get_odb_data": "downloads its ODB files from ECMWF's test-data server at test time",
        "metkit_test_multihandle": "reads latlon.grib, which grib_get_data downloads",
        "metkit_test_gribhandle": "reads synthetic_2msgs.grib, which grib_get_data downloads",
        "metkit_test_expand": "written against the configuration files 1.11.22 cloned online "
                              "(unpinned); offline they are metkitlib 1.13.1's, which give a "
                              "bare `retrieve` no default date and are not strict where it "
                              "expects (2 of its 15 cases)",
        "metkit_test_request": "written against the configuration files 1.11.22 cloned online "
                               "(unpinned); a request's JSON differs with metkitlib 1.13.1's",
    }

    # metkit 1.11's CMakeLists.txt clones its configuration files (language.yaml, params.yaml,
    # shortname-context.yaml, ...) from github.com/ecmwf/metkit-configs, branch main, at
    # configure time: online and unpinned. ECMWF publishes the same files in its metkitlib
    # wheels on PyPI; the wheel of April 2025 (1.13.1, the nearest after 1.11.22, holding the
    # nine files 1.11.22 reads) is pinned by the sha256 PyPI's index publishes, the clone is
    # skipped, and the files are installed where the clone's would be.
    resource(
        name="metkit-configs",
        url="https://files.pythonhosted.org/packages/e6/37/692be6fe7e701c8cb731f9bb3b3f16d644351298296ae1194ee2a185cdab/metkitlib-1.13.1-cp311-cp311-manylinux_2_28_x86_64.whl",
        sha256="e1a14a8b1d43c1b64b04528d5660dd3ad48127a9e136e76ae30d79859cfc99b1",
        expand=False,
        destination="metkit-configs",
        placement="wheel",
        when="@1.11.22",
    )

    def cmake_args(self):
        # builtin passes ENABLE_ODC, but metkit's CMakeLists.txt names the feature ODB: left
        # on, it links whatever odc the node has (Debian's, built on Debian's eckit: two
        # eckits in one process, and fdb-info aborts before main)
        args = super().cmake_args() + [self.define_from_variant("ENABLE_ODB", "odb")]
        if self.spec.satisfies("@1.11.22"):
            args.append(self.define("BUNDLE_SKIP_SHARE", True))
        return args

    def _unpack_configs(self, share):
        import zipfile

        (wheel,) = find(join_path(self.stage.source_path, "metkit-configs"), "*.whl")
        inside = "metkitlib/share/metkit/"
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if name.startswith(inside) and not name.endswith("/"):
                    dest = join_path(share, name[len(inside):])
                    mkdirp(os.path.dirname(dest))
                    with z.open(name) as src, open(dest, "wb") as out:
                        out.write(src.read())

    @run_after("cmake", when="@1.11.22")
    @on_package_attributes(run_tests=True)
    def configs_for_the_tests(self):
        # the suite runs in the build tree, where the clone would have put them
        self._unpack_configs(join_path(self.build_directory, "share", "metkit"))

    @run_after("install", when="@1.11.22")
    def install_configs(self):
        self._unpack_configs(self.prefix.share.metkit)
