# iostack_detect: eccodes as `spack external find` can find it (bin/iostack site init).
import os
import re

from spack_repo.iostack.packages.eccodes.package import Eccodes as IostackEccodes
from spack_repo.iostack_detect.detection import links

from spack.package import *


class Eccodes(IostackEccodes):
    """ecCodes, detectable: builtin's recipe has no detection. Found by its codes_info tool
    (`codes_info -v` prints the version); the variants the stack asks for are read from the
    installation: +tools (grib_ls beside it), +netcdf (grib_to_netcdf), +fortran (the
    libeccodes_f90 library) and +aec (libeccodes links libaec, the CCSDS codec)."""

    executables = [r"^codes_info$"]

    @classmethod
    def determine_version(cls, exe):
        output = Executable(exe)("-v", output=str, error=str).strip()
        return output if re.fullmatch(r"\d+(\.\d+)+", output) else None

    @classmethod
    def determine_variants(cls, exes, version_str):
        found = []
        for exe in exes:
            bin_dir = os.path.dirname(exe)
            libs = cls._libraries_of(exe)
            variants = {
                "tools": os.path.exists(os.path.join(bin_dir, "grib_ls")),
                "netcdf": os.path.exists(os.path.join(bin_dir, "grib_to_netcdf")),
                "fortran": "libeccodes_f90" in libs,
                "aec": "libeccodes" in libs and links(libs["libeccodes"], b"libaec"),
            }
            found.append("".join(("+" if on else "~") + name for name, on in variants.items()))
        return found

    @staticmethod
    def _libraries_of(exe):
        """{name: path} of the ecCodes libraries the tool's installation has, searched
        where the dynamic linker searches and in its prefix's lib directories."""
        from spack.util import ld_so_conf

        prefix = os.path.dirname(os.path.dirname(exe))
        dirs = [os.path.join(prefix, d) for d in ("lib", "lib64")]
        dirs += ld_so_conf.host_dynamic_linker_search_paths()
        found = {}
        for name in ("libeccodes", "libeccodes_f90"):
            for d in dirs:
                path = os.path.join(d, f"{name}.so")
                if name not in found and os.path.exists(path):
                    found[name] = path
        return found
