"""Cray PE builds of ecbuild projects through the repository's CMake toolchain files.

Seed 000 configured eckit and FDB on the login node for the compute nodes, where
configure-time test programs fail or lie. Recipes with a `craype` variant pass
toolchains/cray-<pe>.cmake and the pre-seeded results for their target, so no test program
runs at configure time. IOSTACK_TOOLCHAINS overrides where the files are.
"""
import os
import pathlib

TOOLCHAINS = pathlib.Path(
    os.environ.get("IOSTACK_TOOLCHAINS", pathlib.Path(__file__).resolve().parents[3] / "toolchains")
)
CRAYPE_VALUES = ("none", "cce", "gnu")
CRAYPE_DESCRIPTION = (
    "Configure with iostack's Cray PE toolchain (toolchains/cray-<value>.cmake) "
    "and the pre-seeded configure results of the target"
)


def craype_cmake_args(pkg):
    pe = pkg.spec.variants["craype"].value
    if pe == "none":
        return []
    toolchain = TOOLCHAINS / f"cray-{pe}.cmake"
    preseed = TOOLCHAINS / "preseed" / f"cray-ex-{pkg.spec.target.name}.cmake"
    for f in (toolchain, preseed):
        if not f.is_file():
            raise FileNotFoundError(f"{pkg.name}: craype={pe} needs {f}; regenerate it with "
                                    f"{TOOLCHAINS / 'preseed' / 'regenerate.sh'}")
    return [f"-DCMAKE_TOOLCHAIN_FILE={toolchain}", "-C", str(preseed)]
