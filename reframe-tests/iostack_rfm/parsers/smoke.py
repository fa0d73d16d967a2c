"""The stack smoke check's tables and readers: each package's main program and, where it
has one, how it states its version (after Pawsey's practice of loading every module and
running its program); what Spack says is installed and what its stand-alone tests said.
The packages themselves come from the site's spack.lock (iostack.deployment.stack); their versions
are checked against Spack's installed spec, whatever a program prints. Bundle packages
(nwp-env, ...) have no program: their module loads at the locked version. Standard
library only.
"""
from __future__ import annotations

import dataclasses
import re

from iostack.deployment.stack import RootSpec

#: the job line that lists the modules that did load (a job script goes on after a
#: failed `module load`)
LOADED_MODULES_LINE = 'echo "iostack-smoke: LOADEDMODULES=$LOADEDMODULES"'
#: `spack find --format` of the installed spec
INSTALLED_FORMAT = 'iostack-smoke: installed {name} {version} {prefix}'

# The main program of each package, which must be the installed spec's: the one in its
# prefix comes first on PATH once its module is loaded (none: a library or a bundle).
PROGRAMS = {
    "eccodes": "grib_ls", "fdb": "fdb-info", "eckit": "eckit-version", "openmpi": "mpirun",
    "fio": "fio", "nvme-stage": "nvme-stage", "ior": "ior", "io500": "io500",
    "multio": "multio-hammer",
    "netcdf-output-bench": "netcdf-output-bench", "fdb-archive-bench": "fdb-archive-bench",
    "netcdf-c": "nc-config", "netcdf-fortran": "nf-config", "parallel-netcdf": "pnetcdf-config",
    "hdf5": "h5dump", "openfoam": "simpleFoam",
    "darshan-runtime": "darshan-config", "darshan-util": "darshan-parser",
}


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
    # Darshan's programs print no version; its pkg-config files do. darshan-runtime.pc
    # "Requires: zlib mpich" whatever the MPI: its version alone, not what it requires
    "darshan-runtime": VersionQuery("pkg-config --maximum-traverse-depth=1 --modversion "
                                    "darshan-runtime", r"^\s*(\d+\.\d+\.\d+)\s*$"),
    "darshan-util": VersionQuery("pkg-config --modversion darshan-util",
                                 r"^\s*(\d+\.\d+\.\d+)\s*$"),
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
    # io500 states its version only in a run's output: Spack's installed spec says it
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


def program(spec: RootSpec) -> str | None:
    return None if spec.bundle else PROGRAMS.get(spec.name)


def version_query(spec: RootSpec) -> VersionQuery | None:
    """How the package states its version, if it does (Spack's installed spec says it for
    every package)."""
    if spec.bundle:
        # the bundle's module is loaded at the locked version
        return VersionQuery(LOADED_MODULES_LINE,
                            rf"LOADEDMODULES=(?:.*:)?{re.escape(spec.name)}/([^:\s]+)")
    return VERSION_QUERIES.get(spec.name)


def installed(output: str) -> dict:
    """The installed spec the job's `spack find --format INSTALLED_FORMAT` printed."""
    m = re.search(r'^iostack-smoke: installed (\S+) (\S+) (\S+)$', output, re.MULTILINE)
    if not m:
        raise ValueError("Spack printed no installed spec")
    return {"name": m.group(1), "version": m.group(2), "prefix": m.group(3)}


def program_problems(output: str, spec: RootSpec) -> list[str]:
    """[] when the package's program on PATH is the installed spec's (in its prefix)."""
    name = program(spec)
    if name is None:
        return []
    m = re.search(rf'^iostack-smoke: on PATH {re.escape(name)} (\S*)$', output, re.MULTILINE)
    found = m.group(1) if m else ""
    if not found:
        return [f"{name} is not on PATH"]
    prefix = installed(output)["prefix"].rstrip("/")
    if not found.startswith(prefix + "/"):
        return [f"{name} on PATH is {found}, not the installed {spec.name}'s ({prefix})"]
    return []


#: the summary line of `spack test run`, e.g. "=== 1 passed of 1 spec ===", "1 no_tests of
#: 1 spec" (the recipe has none), "1 skipped of 1 spec" (an external)
_SPACK_TEST_SUMMARY = re.compile(r"^=+ (.*?) of (\d+) specs? =+$", re.MULTILINE)


def spack_test_status(text: str) -> str:
    """What `spack test run` of one spec said: passed, failed, no-tests, skipped, or
    unknown (no summary line)."""
    m = _SPACK_TEST_SUMMARY.search(text)
    if not m:
        return "unknown"
    counts = dict((word, int(n)) for n, word in re.findall(r"(\d+) (\w+)", m.group(1)))
    for status in ("failed", "errored"):
        if counts.get(status):
            return "failed"
    for status in ("passed", "no_tests", "skipped"):
        if counts.get(status):
            return status.replace("_", "-")
    return "unknown"


def spack_test_problems(test_output: str, output: str) -> list[str]:
    """[] when `spack test run` exited 0 and its tests passed, or it had none to run."""
    problems = []
    if not re.search(r'^iostack-smoke: spack test rc=0$', output, re.MULTILINE):
        problems.append("spack test run failed")
    status = spack_test_status(test_output)
    if status in ("failed", "unknown"):
        lines = [line for line in test_output.splitlines() if line.strip()][-3:]
        problems.append(f"{status}: {' / '.join(lines)}")
    return problems


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
