"""The stack smoke check's table: how each package's main executable states its version
(after Pawsey's practice of loading every module and running its program). The packages
themselves come from the site's spack.lock (iostack.deployment.stack); a root without an entry here
fails the smoke check, which says to add one. Bundle packages (nwp-env, ...) have no
program: their check is that their module loads at the locked version. Standard library
only.
"""
from __future__ import annotations

import dataclasses
import re

from iostack.deployment.stack import RootSpec

#: the job line that lists the modules that did load (a job script goes on after a
#: failed `module load`)
LOADED_MODULES_LINE = 'echo "iostack-smoke: LOADEDMODULES=$LOADEDMODULES"'


@dataclasses.dataclass(frozen=True)
class VersionQuery:
    #: shell command run in the job
    command: str
    #: regex whose first group is the version the command reports
    pattern: str
    #: shell lines run first when the package is used from PATH rather than its module
    #: (`{prefix}` is the external's prefix in the lock)
    path_setup: str = ""


# The main executable of each package and how it states its version. Library-only
# packages answer through pkg-config, which their modules put on PKG_CONFIG_PATH.
VERSION_QUERIES: dict[str, VersionQuery] = {
    "eccodes": VersionQuery("grib_ls -V", r"ecCodes Version (\S+)"),
    "fdb": VersionQuery("fdb-info --version", r"^\s*(\d+\.\d+\.\d+)\s*$"),
    "eckit": VersionQuery("eckit-version", r"^\s*(\d+\.\d+\.\d+)\s*$"),
    "metkit": VersionQuery("pkg-config --modversion metkit", r"^\s*(\d+\.\d+\.\d+)\s*$"),
    "multio": VersionQuery("pkg-config --modversion multio", r"^\s*(\d+\.\d+\.\d+)\s*$"),
    # ifsMASTER states no version: OIFS_EXEC (the openifs module's) must be the install of
    # the locked version
    "openifs": VersionQuery('echo "ifsMASTER at $OIFS_EXEC"',
                            r"ifsMASTER at \S*/openifs-([^/\s]+?)-[a-z0-9]{7}/bin/ifsMASTER\."
                            r"(?:SP|DP)$"),
    "openmpi": VersionQuery("mpirun --version", r"\(Open MPI\) (\S+)"),
    "fio": VersionQuery("fio --version", r"fio-(\S+)"),
    "nvme-stage": VersionQuery("nvme-stage --version", r"^nvme-stage (\S+)"),
    # IOR 4 has no --version: a one-process run of 1 KiB names it in its header
    "ior": VersionQuery("ior -b 1k -t 1k -o ior-smoke.tmp", r"^IOR-(\d+\.\d+\.\d+):"),
    # io500 states its version only in a run's output (the IO500 check's): here, the io500
    # on PATH must be the install of the locked version
    "io500": VersionQuery('echo "io500 at $(command -v io500)"',
                          r"io500 at \S*/io500-([^/\s]+?)-[a-z0-9]{7}/bin/io500$"),
    "netcdf-output-bench": VersionQuery("netcdf-output-bench --version",
                                        r"^netcdf-output-bench (\S+)$"),
    "netcdf-c": VersionQuery("nc-config --version", r"netCDF (\S+)"),
    "netcdf-fortran": VersionQuery("nf-config --version", r"netCDF-Fortran (\S+)"),
    "parallel-netcdf": VersionQuery("pnetcdf-config --version", r"PnetCDF (\S+)"),
    "hdf5": VersionQuery("h5dump --version", r"Version (\S+)"),
    # OpenFOAM's solvers print the API version, e.g. "Using: OpenFOAM-v2312 (2312)";
    # Debian's build needs its bashrc sourced first.
    "openfoam": VersionQuery(
        "simpleFoam -help", r"Using: OpenFOAM-\S*\s*\((\d+)\)",
        path_setup=("for f in {prefix}/share/openfoam/etc/bashrc {prefix}/etc/bashrc; do "
                    "[ -r $f ] && . $f && break; done")),
}


def version_query(spec: RootSpec) -> VersionQuery | None:
    if spec.bundle:
        # the bundle's module is loaded at the locked version
        return VersionQuery(LOADED_MODULES_LINE,
                            rf"LOADEDMODULES=(?:.*:)?{re.escape(spec.name)}/([^:\s]+)")
    return VERSION_QUERIES.get(spec.name)


def reported_version(output: str, query: VersionQuery) -> str | None:
    """The version a query's output states (None: it states none)."""
    m = re.search(query.pattern, output, re.MULTILINE)
    return m.group(1) if m else None


def loaded_modules(output: str) -> set[str]:
    """The modules the job's LOADED_MODULES_LINE lists."""
    m = re.search(r'^iostack-smoke: LOADEDMODULES=(\S*)', output, re.MULTILINE)
    if not m:
        raise ValueError("no iostack-smoke: LOADEDMODULES line")
    return set(m.group(1).split(':')) if m.group(1) else set()
