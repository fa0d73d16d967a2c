# iostack_detect: openblas as `spack external find` can find it (bin/iostack site init).
from spack_repo.builtin.packages.openblas.package import Openblas as BuiltinOpenblas
from spack_repo.iostack_detect.detection import pkgconfig_of

from spack.package import *


class Openblas(BuiltinOpenblas):
    """OpenBLAS, detectable: builtin's recipe names its library but cannot tell its version.
    The library's pkg-config file gives the version, and its threading: Debian installs each
    threading model in a directory of its own (openblas-pthread, openblas-openmp), and
    OpenBLAS's own openblas_config says USE_OPENMP."""

    libraries = [r"^libopenblas\.so$"]

    @classmethod
    def determine_version(cls, lib):
        return pkgconfig_of(lib).get("version") or pkgconfig_of(lib).get("Version") or None

    @classmethod
    def determine_variants(cls, libs, version_str):
        found = []
        for lib in libs:
            pc = pkgconfig_of(lib)
            config = pc.get("openblas_config", "")
            if "USE_OPENMP=1" in config or "openblas-openmp" in pc.get("libdir", ""):
                threads = "openmp"
            elif "openblas-pthread" in pc.get("libdir", "") or "USE_OPENMP=0" in config:
                threads = "pthreads"
            else:
                threads = "none"
            found.append(f"threads={threads}")
        return found
