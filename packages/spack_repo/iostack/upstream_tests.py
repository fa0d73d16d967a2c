"""ECMWF libraries' own test suites (ctest), as `spack install --test=root` runs them on a
build node: offline, and often as root (a CI runner's or an image build's user).

    class Fdb(UpstreamTestsPackage, CrayPEPackage, BuiltinFdb):
        OFFLINE_EXCLUDED = {
            "test name": "why it cannot run on an offline build node",
        }

The builtin recipe's own check runs the suite; the tests the recipe names are left out
through ctest's own list of tests to ignore (CTEST_CUSTOM_TESTS_IGNORE in the build tree's
CTestCustom.cmake, which ctest reads however it is started), each with its reason
(tests/nightly/test_upstream_suites.py reads them and reports them). Open MPI's mpiexec
refuses to start as root unless told, and more ranks than the node has cores (eckit's MPI
tests start 4, a build node may have 2), and Spack builds in a cleaned environment, so a
caller's settings never reach ctest: the suite's MPI tests get both here (Open MPI 4's
names). Nothing changes for a build without tests.
"""
import os

from spack.package import PackageBase, on_package_attributes, run_after


class UpstreamTestsPackage(PackageBase):
    """Mixin (as key4hep-spack's Key4hepPackage): the upstream ctest suite, offline."""

    #: ctest name -> why it cannot run on an offline build node
    OFFLINE_EXCLUDED: dict = {}

    def setup_build_environment(self, env):
        inherited = getattr(super(), "setup_build_environment", None)
        if inherited:   # builtin eckit has one; metkit and FDB leave it to their builder
            inherited(env)
        if self.run_tests:
            env.set("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.set("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            env.set("OMPI_MCA_rmaps_base_oversubscribe", "1")

    @run_after("cmake")
    @on_package_attributes(run_tests=True)
    def ignore_offline_excluded_tests(self):
        if not self.OFFLINE_EXCLUDED:
            return
        names = " ".join(f'"{name}"' for name in sorted(self.OFFLINE_EXCLUDED))
        with open(os.path.join(self.build_directory, "CTestCustom.cmake"), "a") as f:
            f.write(f"# iostack: offline build node (OFFLINE_EXCLUDED)\n"
                    f"list(APPEND CTEST_CUSTOM_TESTS_IGNORE {names})\n")
