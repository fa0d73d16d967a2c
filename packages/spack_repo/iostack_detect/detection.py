"""How the detection recipes find an installed library: by the shared library itself (Spack's
LibrariesFinder searches the dynamic linker's paths for it) and the pkg-config file the
library's own install puts beside it, which names its prefix and version. Debian's parallel
netCDF-C, for one, lives in a prefix of its own (/usr/lib/<triplet>/netcdf/mpi) that only its
pkg-config file names."""
import glob
import os
import re


def pkgconfig_of(library: str) -> dict[str, str]:
    """Variables and fields of the pkg-config file beside `library` (in its directory's
    pkgconfig/) whose Libs link it; {} when there is none."""
    name = os.path.basename(library)[len("lib"):].split(".so")[0]
    for pc in sorted(glob.glob(os.path.join(os.path.dirname(library), "pkgconfig", "*.pc"))):
        with open(pc) as f:
            entries = dict(re.findall(r"^([\w.]+)\s*[:=]\s*(.*?)\s*$", f.read(), re.M))
        values: dict[str, str] = {}
        for key, value in entries.items():
            # ${var}: a variable defined above it
            values[key] = re.sub(r"\$\{(\w+)\}", lambda m, known=values: known.get(m.group(1), ""),
                                 value)
        if re.search(rf"(^|\s)-l{re.escape(name)}(\s|$)", values.get("Libs", "")):
            return values
    return {}


def installed_prefix(library: str) -> dict[str, str]:
    """{"prefix": the pkg-config file's prefix} when that directory is on this node, else {}
    (Spack then takes the directory above the library's lib/). Debian 13's pnetcdf.pc names
    the package's build directory."""
    prefix = pkgconfig_of(library).get("prefix")
    return {"prefix": os.path.normpath(prefix)} if prefix and os.path.isdir(prefix) else {}


def links(library: str, prefix: bytes) -> bool:
    """Whether the shared library names a library starting with `prefix` (ELF DT_NEEDED)."""
    import spack.util.elf

    try:
        with open(library, "rb") as f:
            needed = spack.util.elf.parse_elf(f, dynamic_section=True).dt_needed_strs
    except (OSError, spack.util.elf.ElfParsingError):
        return False
    return any(n.startswith(prefix) for n in needed)
