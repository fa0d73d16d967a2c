"""Cray PE builds of ecbuild projects through the repository's CMake toolchain files.

[OIFS-HECToR] configured eckit and FDB on the login node for the compute nodes, where
configure-time test programs fail or lie. A recipe that also derives from CrayPEPackage
gets the `craype` variant; with craype=cce or gnu it passes toolchains/cray-<pe>.cmake and
the pre-seeded configure results of its target (toolchains/preseed/cray-ex-<target>.cmake),
so no test program runs at configure time. The files are in this Spack repository
(spack_repo/iostack/toolchains), so they are found wherever it is added;
IOSTACK_TOOLCHAINS overrides where they are.

    class Eckit(CrayPEPackage, BuiltinEckit):    # the mixin first: its cmake_args wraps
        ...                                      # the builtin recipe's
"""
import os
import pathlib

from spack.package import InstallError, PackageBase, variant

TOOLCHAINS = pathlib.Path(
    os.environ.get("IOSTACK_TOOLCHAINS", pathlib.Path(__file__).resolve().parent / "toolchains")
)


class CrayPEPackage(PackageBase):
    """Mixin (as key4hep-spack's Key4hepPackage): the `craype` variant and its cmake args."""

    variant("craype", default="none", values=("none", "cce", "gnu"), multi=False,
            description="Configure with iostack's Cray PE toolchain (toolchains/cray-<value>.cmake) "
                        "and the pre-seeded configure results of the target")

    def craype_cmake_args(self):
        pe = self.spec.variants["craype"].value
        if pe == "none":
            return []
        toolchain = TOOLCHAINS / f"cray-{pe}.cmake"
        preseed = TOOLCHAINS / "preseed" / f"cray-ex-{self.spec.target.name}.cmake"
        for f in (toolchain, preseed):
            if not f.is_file():
                raise InstallError(f"{self.name}: craype={pe} needs {f}; regenerate it with "
                                   f"the repository's toolchains/preseed/regenerate.sh (toolchains/README.md)")
        return [f"-DCMAKE_TOOLCHAIN_FILE={toolchain}", "-C", str(preseed)]

    def cmake_args(self):
        # The next class's cmake_args (the builtin recipe's); CMakePackage itself has none.
        inherited = getattr(super(), "cmake_args", None)
        return (inherited() if inherited else []) + self.craype_cmake_args()
