"""The committed locks describe the machines they are for (issue 18): every spec of a site's
spack.lock is for the site's OS and target and links its libc; a compiled spec has one
compiler, the compiler-wrapper and runtime a build needs, and an MPI of its own compiler;
each stack links only itself. Read from the JSON locks: no Spack needed. Each check is also
run on a lock broken in the one way it guards against, and must say so."""
import copy
import dataclasses

import pytest
from spack_lock import Lock, described, label, target

from iostack.site import facts as site_facts

CRAYPE_OF = {"cce": "cce", "gcc": "gnu"}
UCX_RDMA = ("verbs", "rc", "ud", "dc", "mlx5_dv", "rdmacm")


def os_and_target(lock, facts):
    return [f"{described(s)} is for {s['arch']['platform_os']}/{target(s)}, "
            f"not the site's {facts.os}/{facts.target}"
            for s in lock.specs.values()
            if (s["arch"]["platform_os"], target(s)) != (facts.os, facts.target)]


def one_compiler_per_spec(lock, facts):
    return [f"{described(s)} mixes compilers {sorted(lock.compilers(s))}"
            for s in lock.specs.values() if len(lock.compilers(s)) > 1]


def libc_and_runtimes(lock, facts):
    """A spec Spack compiles links the site's libc and has the compiler-wrapper (and
    gcc-runtime when gcc builds it), as a build on the nodes gets; no other libc is there."""
    problems = [f"{described(s)} is a libc other than the site's {facts.libc}"
                for s in lock.specs.values() if s["name"] in ("glibc", "musl")
                and label(s) != facts.libc]
    for s in lock.specs.values():
        compilers = lock.compilers(s)
        if not compilers or s.get("external"):
            continue
        libcs = [label(d) for d in lock.edges(s, "libc")]
        if libcs != [facts.libc]:
            problems.append(f"{described(s)} links libc {libcs}, not {facts.libc}")
        if not any(d["name"] == "compiler-wrapper" for d in lock.edges(s, deptype="build")):
            problems.append(f"{described(s)} has no compiler-wrapper: no CC/CXX/FC in its build")
        if any(c.startswith("gcc@") for c in compilers) and not any(
                d["name"] == "gcc-runtime" for d in lock.edges(s, deptype="link")):
            problems.append(f"{described(s)} is built with gcc but links no gcc-runtime")
    return problems


def mpi_of_its_compiler(lock, facts):
    problems = []
    for s in lock.specs.values():
        for mpi in lock.edges(s, "mpi"):
            if lock.compilers(mpi) and lock.compilers(mpi) != lock.compilers(s):
                problems.append(f"{described(s)} ({sorted(lock.compilers(s))}) links "
                                f"{described(mpi)} of {sorted(lock.compilers(mpi))}")
    return problems


def stacks_link_only_themselves(lock, facts):
    """Each root links specs of one compiler, and a stack (the roots of one compiler) has one
    build of each package it links."""
    problems, builds = [], {}
    for root in lock.roots():
        stack = lock.stack_compiler(root)
        if len(stack) > 1:
            problems.append(f"root {described(root)} links specs of {sorted(stack)}")
            continue
        for s in lock.linked(root):
            builds.setdefault((tuple(stack), s["name"]), set()).add(s["hash"])
    problems += [f"{name} is built {len(hashes)} times in the {'/'.join(stack) or 'no'}-compiler "
                 "stack" for (stack, name), hashes in sorted(builds.items()) if len(hashes) > 1]
    return problems


def craype_matches_compiler(lock, facts):
    """On a Cray PE (the lock has CCE), packages with a `craype` variant configure with the
    toolchain file of their compiler; elsewhere with none."""
    cray = bool(lock.named("cce"))
    problems = []
    for s in lock.specs.values():
        craype = s["parameters"].get("craype")
        if craype is None:
            continue
        compiler = (lock.compiler(s) or "").split("@")[0]
        want = CRAYPE_OF.get(compiler, "none") if cray else "none"
        if craype != want:
            problems.append(f"{described(s)} has craype={craype}, built with {compiler}: "
                            f"want craype={want}")
    return problems


def fdb_on_the_sites_file_system(lock, facts):
    lustre = any(fs["type"] == "lustre" for fs in facts.file_systems)
    return [f"{described(s)} backends={s['parameters'].get('backends')}: the site "
            f"{'has' if lustre else 'has no'} Lustre"
            for s in lock.named("fdb") if ("lustre" in s["parameters"].get("backends", [])) != lustre]


def grib_definitions_in_the_lock(lock, facts):
    """Each package of the site's own ecCodes definitions (facts grib_definitions) is built
    with its stack: ecCodes' module loads it."""
    return [f"grib_definitions: package {p} is not in the lock: add it to the site's specs"
            for p in facts.grib_definition_packages if not lock.named(p)]


CHECKS = [os_and_target, one_compiler_per_spec, libc_and_runtimes, mpi_of_its_compiler,
          stacks_link_only_themselves, craype_matches_compiler, fdb_on_the_sites_file_system,
          grib_definitions_in_the_lock]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("site", site_facts.names())
def test_every_spec_of_every_site_lock(site, check):
    assert check(Lock.of(site), site_facts.load(site)) == []


def test_cluster_locks_carry_the_nodes_a_real_build_needs():
    for site in ("cray-ex", "oci-bm-optimized3"):
        lock = Lock.of(site)
        for name in ("compiler-wrapper", "gcc-runtime", "glibc"):
            assert lock.named(name), f"{site}: no {name} in the lock"


# the compilers of cray-ex's two PrgEnvs, as its facts name them
_PE = site_facts.load("cray-ex").programming_environment
CCE, GNU = _PE["prgenvs"]["PrgEnv-cray"]["compiler"], _PE["prgenvs"]["PrgEnv-gnu"]["compiler"]


def test_cray_ex_has_a_cce_stack_and_a_gnu_stack():
    lock = Lock.of("cray-ex")
    (openifs,) = lock.named("openifs")
    (nwp_env,) = lock.named("nwp-env")
    for root in (openifs, nwp_env):
        assert lock.stack_compiler(root) == {CCE}, described(root)
    (fdb,) = [s for s in lock.linked(openifs) if s["name"] == "fdb"]
    assert fdb["parameters"]["craype"] == "cce"
    assert openifs in lock.linked(nwp_env)
    stacks = {}
    for root in lock.roots():
        stacks.setdefault(frozenset(lock.stack_compiler(root)), []).append(root["name"])
    assert set(stacks) == {frozenset({CCE}), frozenset({GNU})}
    assert (CCE, GNU) == ("cce@16.0.1", "gcc@11.2.0")     # CPE 23.09 [ARCHER2-DevEnv]
    for name in ("eccodes", "eckit", "metkit", "fdb"):
        assert {lock.compiler(s) for s in lock.named(name)} == {CCE, GNU}
    # each flavour of cray-mpich is the one of its compiler's PrgEnv
    for mpich in lock.named("cray-mpich"):
        flavour = {CCE: "/ofi/crayclang/", GNU: "/ofi/gnu/"}[lock.compiler(mpich)]
        assert f"{mpich['name']}@{mpich['version']}" == _PE["mpi"]
        assert flavour in mpich["external"]["path"]
    assert len(lock.named("cray-mpich")) == 2


def test_oci_open_mpi_uses_ucx_over_rdma_core():
    lock = Lock.of("oci-bm-optimized3")
    (openmpi,) = lock.named("openmpi")
    assert "ucx" in openmpi["parameters"]["fabrics"]
    (ucx,) = [d for d in lock.edges(openmpi) if d["name"] == "ucx"]
    assert ucx_problems(lock) == []
    assert [d["name"] for d in lock.edges(ucx) if d["name"] == "rdma-core"] == ["rdma-core"]
    (rdma,) = lock.named("rdma-core")
    assert rdma["external"]["path"] == "/usr"


def ucx_problems(lock):
    return [f"{described(u)} lacks +{v}" for u in lock.named("ucx") for v in UCX_RDMA
            if u["parameters"].get(v) is not True]


# ---- each check fails on the lock it guards against ---------------------------------------

def _first(lock, name, compiler=None):
    return next(s for s in lock.specs.values() if s["name"] == name
                and (compiler is None or lock.compiler(s) == compiler))


def _edge(spec, name):
    return next(e for e in spec["dependencies"] if e["name"] == name)


def _debian_spec(lock):
    _first(lock, "fdb", CCE)["arch"]["platform_os"] = "debian12"
    return "fdb@"


def _mixed_compilers(lock):
    eccodes = _first(lock, "eccodes", CCE)
    gcc = _first(lock, "gcc")
    _edge(eccodes, "cce")["parameters"]["virtuals"] = ["c", "cxx"]
    eccodes["dependencies"].append({"hash": gcc["hash"], "name": "gcc",
                                    "parameters": {"deptypes": ["build"], "virtuals": ["fortran"]}})
    return "eccodes@"


def _no_libc(lock):
    fdb = _first(lock, "fdb", GNU)
    fdb["dependencies"] = [e for e in fdb["dependencies"] if "libc" not in e["parameters"]["virtuals"]]
    return "fdb@"


def _host_libc(lock):
    _first(lock, "glibc")["version"] = "2.36"
    return "glibc@2.36"


def _cce_mpich_in_gnu_stack(lock):
    io500 = _first(lock, "io500")
    cce_mpich = next(m for m in lock.named("cray-mpich") if lock.compiler(m) == CCE)
    _edge(io500, "cray-mpich")["hash"] = cce_mpich["hash"]
    return "io500@"


def _gnu_eccodes_in_openifs(lock):
    openifs = _first(lock, "openifs")
    _edge(openifs, "eccodes")["hash"] = _first(lock, "eccodes", GNU)["hash"]
    return "openifs@"


def _openifs_fdb_without_toolchain(lock):
    fdb = next(s for s in lock.linked(_first(lock, "openifs")) if s["name"] == "fdb")
    fdb["parameters"]["craype"] = "none"
    return "craype=none"


def _fdb_without_lustre(lock):
    _first(lock, "fdb", GNU)["parameters"]["backends"] = ["posix"]
    return "fdb@"


BREAKAGES = [
    (os_and_target, _debian_spec), (one_compiler_per_spec, _mixed_compilers),
    (libc_and_runtimes, _no_libc), (libc_and_runtimes, _host_libc),
    (mpi_of_its_compiler, _cce_mpich_in_gnu_stack),
    (stacks_link_only_themselves, _gnu_eccodes_in_openifs),
    (craype_matches_compiler, _openifs_fdb_without_toolchain),
    (fdb_on_the_sites_file_system, _fdb_without_lustre),
]


@pytest.mark.parametrize("check,breakage", BREAKAGES, ids=lambda f: f.__name__)
def test_a_broken_cray_ex_lock_fails_its_check(check, breakage):
    lock = Lock(copy.deepcopy(Lock.of("cray-ex").data))
    named = breakage(lock)
    problems = check(lock, site_facts.load("cray-ex"))
    assert problems and any(named in p for p in problems), problems


def test_a_package_of_definitions_the_lock_lacks_is_named():
    facts = dataclasses.replace(site_facts.load("setonix"),
                                grib_definitions=("/software/defs", "site-eccodes-defs"))
    assert grib_definitions_in_the_lock(Lock.of("setonix"), facts) == [
        "grib_definitions: package site-eccodes-defs is not in the lock: add it to the site's "
        "specs"]


def test_ucx_without_verbs_is_named():
    lock = Lock(copy.deepcopy(Lock.of("oci-bm-optimized3").data))
    _first(lock, "ucx")["parameters"]["verbs"] = False
    assert ucx_problems(lock) == [f"{described(_first(lock, 'ucx'))} lacks +verbs"]
