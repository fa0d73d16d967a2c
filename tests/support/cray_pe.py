"""A PE-shaped tree: stand-ins of the HPE Cray Programming Environment a site's Spack
configuration names, so that what is built on the PE's model can be built and loaded on a
machine without one (tests/integration/test_lmod_cray_pe.py, test_cray_pe_drivers.py,
tests/nightly/test_cray_pe_spack_build.py).

What it holds, under a directory that stands for /opt/cray/pe (`PeTree.pe`):
- craype's drivers cc/CC/ftn (craype/<version>/bin, where the site's compiler externals name
  them): like craype, they refuse to compile without a PrgEnv (PE_ENV) and a CPU target
  module (CRAY_CPU_TARGET) loaded, and add what the loaded modules give a real driver:
  cray-mpich's headers and library (CRAY_MPICH_DIR); they compile with this machine's
  gcc/g++/gfortran whatever the PrgEnv (CCE's -h options dropped, -homp read as -fopenmp),
  and log every call (IOSTACK_FAKE_PE_LOG: name, PE_ENV, CRAY_CPU_TARGET, CRAY_MPICH_DIR);
- each cray-mpich prefix the site names, whose MPI is this machine's Open MPI (its headers and
  libmpi, and mpicc/mpicxx/mpif90 calling the drivers, as cray-mpich's own do);
- the compilers', LibSci's and cray-python's prefixes;
- Lmod modules that do what HPE's do [ARCHER2-Lmod] [ARCHER2-DevEnv]: PrgEnv-<x> sets PE_ENV
  and loads craype, its compiler, cray-mpich and cray-libsci; craype puts the drivers on PATH;
  a compiler module is of family "compiler", sets CRAY_LMOD_COMPILER (its level in HPE's
  hierarchy), puts that level on MODULEPATH (where cray-mpich is) and adds the directories of
  LMOD_CUSTOM_COMPILER_<level>_PREFIX (HPE's lmodHierarchy.get_user_custom_path); cray-mpich
  and cray-libsci add their library directories to CRAY_LD_LIBRARY_PATH; craype-x86-* sets
  CRAY_CPU_TARGET; cpe/<release> reloads the loaded PE modules at that release's versions.

What it cannot be: CCE. Both PrgEnvs compile with gcc, so nothing here shows how CCE
itself compiles, links or what its runtime needs.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import subprocess

import yaml

from iostack.core import paths
from iostack.site import facts as site_facts

#: craype's CPU target module names and what CRAY_CPU_TARGET they set
_TARGET_MODULE = re.compile(r"craype-(x86-[a-z]+)$")
#: this machine's Open MPI, behind every cray-mpich prefix
OPENMPI_INCLUDE = pathlib.Path("/usr/lib/x86_64-linux-gnu/openmpi/include")
OPENMPI_LIB = pathlib.Path("/usr/lib/x86_64-linux-gnu/libmpi.so")

DRIVER = r"""#!/usr/bin/env bash
# Stand-in of craype's driver (cc, CC or ftn by its name): tests/support/cray_pe.py.
name="$(basename "$0")"
case "$name" in
  cc)  real=gcc ;;
  CC)  real=g++ ;;
  ftn) real=gfortran ;;
  *)   echo "craype stand-in: unknown name $name" >&2; exit 2 ;;
esac
if [ -z "${PE_ENV:-}" ]; then
  echo "$name: no programming environment loaded (PE_ENV is not set): module load PrgEnv-..." >&2
  exit 1
fi
if [ -z "${CRAY_CPU_TARGET:-}" ]; then
  echo "$name: no CPU target module loaded (CRAY_CPU_TARGET is not set): module load craype-x86-..." >&2
  exit 1
fi
if [ -n "${IOSTACK_FAKE_PE_LOG:-}" ]; then
  # one write per call: parallel make runs several drivers at once
  printf '%s\t%s\t%s\t%s%s\n' "$name" "$PE_ENV" "$CRAY_CPU_TARGET" "${CRAY_MPICH_DIR:-}" \
    "$(printf '\t%s' "$@")" >> "$IOSTACK_FAKE_PE_LOG"
fi
args=()
links=1
inputs=0
for a in "$@"; do
  case "$a" in
    -homp)                args+=(-fopenmp) ;;
    -h*|-dynamic|-static) ;;
    -c|-E|-S|-M|-MM|--version|-dumpversion|-dumpfullversion|-dumpmachine|-print-*) links=0; args+=("$a") ;;
    -*)                   args+=("$a") ;;
    *)                    inputs=1; args+=("$a") ;;
  esac
done
if [ -n "${CRAY_MPICH_DIR:-}" ]; then
  args=("-I$CRAY_MPICH_DIR/include" "${args[@]}")
  if [ "$links" = 1 ] && [ "$inputs" = 1 ]; then
    args+=("-L$CRAY_MPICH_DIR/lib" -lmpi)
  fi
fi
exec "$real" "${args[@]}"
"""


def _externals(site: str) -> dict[str, list[dict]]:
    packages = yaml.safe_load((paths.SPACK_ENV_SITES / site / "packages.yaml").read_text())
    return {name: (entry or {}).get("externals", [])
            for name, entry in packages["packages"].items()}


def _version(spec: str) -> str:
    return spec.split()[0].split("@", 1)[1]


def _compiler_of(spec: str) -> str | None:
    m = re.search(r"%([a-z]+@[\d.]+)", spec)
    return m.group(1) if m else None


def _write(path: pathlib.Path, text: str, mode: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mode is not None:
        path.chmod(mode)


@dataclasses.dataclass
class PeTree:
    """The tree, once written: `pe` stands for /opt/cray/pe; `core` is its core module
    directory (what a user's MODULEPATH starts with)."""
    pe: pathlib.Path
    core: pathlib.Path
    drivers: pathlib.Path
    mpich: dict[str, pathlib.Path]

    def real(self, path: str) -> pathlib.Path:
        """Where a path under /opt/cray/pe of the site's configuration is in this tree."""
        return self.pe / pathlib.Path(path).relative_to("/opt/cray/pe")


CUSTOM_HOOK = """
-- HPE's custom path hook: the directories of LMOD_CUSTOM_COMPILER_<level>_PREFIX
local custom = os.getenv("LMOD_CUSTOM_COMPILER_" .. level:upper():gsub("[/.-]", "_") .. "_PREFIX")
for dir in (custom or ""):gmatch("[^:]+") do prepend_path("MODULEPATH", dir) end
"""


def write(pe: pathlib.Path, site: str = "cray-ex", releases: dict | None = None,
          module_root: str | None = None) -> PeTree:
    """The PE-shaped tree of `site` under `pe` (which stands for /opt/cray/pe): the
    drivers, MPI, LibSci and compiler prefixes and the modules the site's packages.yaml names,
    the PrgEnvs and compiler levels of its facts. `releases` ({release: {"PrgEnv", "cce",
    "gcc", "cray-mpich", "cray-libsci": version}}) adds cpe/<release> modules of other releases
    (the facts' one is always there). `module_root` is the path the modules name for `pe`
    (default: /opt/cray/pe, where a mount namespace puts the tree; `pe` itself to use it in
    place)."""
    facts = site_facts.load(site)
    pe_facts = facts.programming_environment
    externals = _externals(site)
    root = module_root or "/opt/cray/pe"
    core = pe / "lmod" / "modulefiles" / "core"

    def in_modules(path: str) -> str:
        return path.replace("/opt/cray/pe", root, 1)

    compilers = {e["compiler"]: e for e in pe_facts["prgenvs"].values()}
    driver_dirs = set()
    wanted_modules: set[str] = set()
    for name in ("cce", "gcc"):
        for ext in externals.get(name, []):
            attrs = (ext.get("extra_attributes") or {}).get("compilers") or {}
            for exe in attrs.values():
                driver_dirs.add(pathlib.Path(exe).parent)
            (pe / pathlib.Path(ext["prefix"]).relative_to("/opt/cray/pe")).mkdir(
                parents=True, exist_ok=True)
            wanted_modules.update(ext.get("modules") or [])
    (driver_dir,) = driver_dirs
    drivers = pe / driver_dir.relative_to("/opt/cray/pe")
    for exe in ("cc", "CC", "ftn"):
        _write(drivers / exe, DRIVER, 0o755)
    craype_version = driver_dir.parent.name

    # cray-mpich: one prefix per compiler, this machine's Open MPI behind it
    mpich: dict[str, pathlib.Path] = {}
    mpich_prefix: dict[str, str] = {}
    for ext in externals.get("cray-mpich", []):
        compiler = _compiler_of(ext["spec"])
        prefix = pe / pathlib.Path(ext["prefix"]).relative_to("/opt/cray/pe")
        (prefix / "lib").mkdir(parents=True, exist_ok=True)
        if not (prefix / "include").exists():
            (prefix / "include").symlink_to(OPENMPI_INCLUDE)
        if not (prefix / "lib" / "libmpi.so").exists():
            (prefix / "lib" / "libmpi.so").symlink_to(OPENMPI_LIB)
        for wrapper, driver in (("mpicc", "cc"), ("mpicxx", "CC"), ("mpif90", "ftn")):
            _write(prefix / "bin" / wrapper,
                   f'#!/bin/sh\nexec {in_modules(str(driver_dir))}/{driver} "$@"\n', 0o755)
        mpich[compiler] = prefix
        mpich_prefix[compiler] = ext["prefix"]
        wanted_modules.update(ext.get("modules") or [])
    for name in ("cray-libsci", "python"):
        for ext in externals.get(name, []):
            prefix = pe / pathlib.Path(ext["prefix"]).relative_to("/opt/cray/pe")
            (prefix / "lib").mkdir(parents=True, exist_ok=True)
            if name == "python" and not (prefix / "bin" / "python3").exists():
                (prefix / "bin").mkdir(parents=True, exist_ok=True)
                (prefix / "bin" / "python3").symlink_to("/usr/bin/python3")
            wanted_modules.update(ext.get("modules") or [])

    release = pe_facts["release"]
    versions = {"PrgEnv": "8.0.0", "cray-mpich": _version(pe_facts["mpi"]),
                "cray-libsci": _version(pe_facts["libsci"])}
    for compiler in compilers:
        versions[compiler.split("@")[0]] = compiler.split("@")[1]
    all_releases = {**(releases or {}), release: {**versions, **(releases or {}).get(release, {})}}

    for rel, vers in all_releases.items():
        for prgenv, entry in pe_facts["prgenvs"].items():
            compiler = entry["compiler"].split("@")[0]
            pe_env = {"cce": "CRAY", "gcc": "GNU"}.get(compiler, compiler.upper())
            _write(core / prgenv / f"{vers['PrgEnv']}.lua",
                   f'family("PrgEnv")\nsetenv("PE_ENV", "{pe_env}")\n'
                   f'load("craype")\nload("{compiler}")\nload("cray-mpich")\nload("cray-libsci")\n')
        for compiler_spec, entry in compilers.items():
            compiler = compiler_spec.split("@")[0]
            level = entry["lmod_compiler"]
            _write(core / compiler / f"{vers[compiler]}.lua",
                   f'family("compiler")\nlocal level = "{level}"\n'
                   'setenv("CRAY_LMOD_COMPILER", level)\n'
                   f'prepend_path("MODULEPATH", "{pe}/lmod/modulefiles/compiler/" .. level)\n'
                   + CUSTOM_HOOK)
            # this release's build of cray-mpich for the compiler (another release's: the
            # same directory of its version)
            prefix = in_modules(mpich_prefix[compiler_spec].replace(
                versions["cray-mpich"], vers["cray-mpich"]))
            _write(pe / "lmod" / "modulefiles" / "compiler" / level / "cray-mpich"
                   / f"{vers['cray-mpich']}.lua",
                   f'setenv("CRAY_MPICH_DIR", "{prefix}")\n'
                   f'prepend_path("CRAY_LD_LIBRARY_PATH", "{prefix}/lib")\n')
        _write(core / "cray-libsci" / f"{vers['cray-libsci']}.lua",
               f'prepend_path("CRAY_LD_LIBRARY_PATH", "{root}/libsci/{vers["cray-libsci"]}/lib")\n')
        loads = "".join(
            f'if isloaded("{name}") then load("{name}/{vers[key]}") end\n'
            for name, key in [*((p, "PrgEnv") for p in pe_facts["prgenvs"]),
                              *((c.split("@")[0], c.split("@")[0]) for c in compilers),
                              ("cray-mpich", "cray-mpich"), ("cray-libsci", "cray-libsci")])
        _write(core / "cpe" / f"{rel}.lua",
               f'family("cpe")\nsetenv("CRAY_PE_RELEASE", "{rel}")\n' + loads)
    _write(core / "craype" / f"{craype_version}.lua",
           f'prepend_path("PATH", "{in_modules(str(driver_dir))}")\n')
    # the rest of what the site's externals load: target and network modules, libfabric,
    # xpmem, cray-python
    written = {"cpe", "craype", "cray-mpich", "cray-libsci", *pe_facts["prgenvs"],
               *(c.split("@")[0] for c in compilers)}
    for module in sorted(wanted_modules):
        name, _, version = module.partition("/")
        if name in written:
            continue
        target = _TARGET_MODULE.match(name)
        if target:
            body = f'family("craype_cpu")\nsetenv("CRAY_CPU_TARGET", "{target.group(1)}")\n'
        elif name == "craype-network-ofi":
            body = 'family("craype_network")\nsetenv("CRAYPE_NETWORK_TARGET", "ofi")\n'
        elif name == "cray-python":
            python = next(e for e in externals["python"] if module in (e.get("modules") or []))
            body = f'prepend_path("PATH", "{in_modules(python["prefix"])}/bin")\n'
        else:
            body = f'setenv("IOSTACK_FAKE_PE_{name.upper().replace("-", "_")}", "loaded")\n'
        _write(core / name / f"{version or '1.0'}.lua", body)
    return PeTree(pe=pe, core=core, drivers=drivers, mpich=mpich)


def bash(script: str, env: dict, timeout: int = 600) -> subprocess.CompletedProcess:
    """`script` in a clean bash (no profile), Lmod's `module` defined."""
    return subprocess.run(["bash", "--noprofile", "--norc", "-c",
                           ". /usr/share/lmod/lmod/init/bash && " + script],
                          capture_output=True, text=True, env=env, timeout=timeout)


def clean_environment(**extra) -> dict:
    """This process's environment without Lmod's, the PE's or a module's variables."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LMOD", "MODULE", "_ModuleTable", "__LMOD", "CRAY", "PE_"))}
    env.update(extra)
    return env
