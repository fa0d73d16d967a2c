"""The smoke check's package list comes from each site's spack.lock, with a version query
for every root of the local site and the modules the Lmod hierarchy needs."""
import pytest

from iostack.deployment import stack
from iostack.site import facts
from iostack_rfm import smoke


def test_local_roots_come_from_the_lock_with_a_version_query_each():
    roots = {r.name: r for r in stack.site_roots("local")}
    assert {"eccodes", "fdb", "eckit", "metkit", "ior", "io500", "netcdf-output-bench",
            "nvme-stage"} <= set(roots)
    for r in roots.values():
        assert smoke.version_query(r) is not None, f"no version query for {r.name}"
    # Debian's ecCodes is an external; the rest is Spack-built, the MPI programs and
    # libraries below Open MPI in the Lmod hierarchy
    assert roots["eccodes"].is_external and roots["eccodes"].external_prefix == "/usr"
    assert not roots["fdb"].is_external
    assert roots["fdb"].modules_to_load() == ["openmpi/4.1.4", "fdb/5.13.106"]
    assert roots["nvme-stage"].modules_to_load() == ["nvme-stage/1.1.0"]
    # what the smoke check's environment must offer: gcc builds run in a `+gnu` one
    assert {r.name: r.compiler for r in roots.values()} == {
        "eccodes": "", "eckit": "gcc", "metkit": "gcc", "fdb": "gcc", "multio": "gcc",
        "ior": "gcc", "io500": "gcc", "netcdf-output-bench": "gcc", "nvme-stage": ""}


def test_cray_builds_are_named_by_their_programming_environment():
    compilers = {(r.name, r.compiler) for r in stack.site_roots("cray-ex")}
    assert {("fdb", "cce"), ("fdb", "gnu"), ("ior", "gcc")} <= compilers


@pytest.mark.parametrize("site", facts.spack_sites())
def test_every_site_lock_parses_into_unique_keys(site):
    roots = stack.site_roots(site)
    assert roots, f"{site}: no roots in its spack.lock"
    keys = [r.key for r in roots]
    assert len(keys) == len(set(keys))


def spec(name, version, deps=(), external=None, build_system="cmake", craype=None):
    params = {"build_system": build_system}
    if craype:
        params["craype"] = craype
    s = {"name": name, "version": version, "hash": f"h{name}{version}{craype}",
         "parameters": params,
         "dependencies": [{"name": d["name"], "hash": d["hash"],
                           "parameters": {"virtuals": v, "deptypes": ["build", "link"]}}
                          for d, v in deps]}
    if external:
        s["external"] = external
    return s


def lock_of(*roots, others=()):
    return {"concrete_specs": {s["hash"]: s for s in (*roots, *others)},
            "roots": [{"hash": s["hash"], "spec": s["name"]} for s in roots]}


def test_hierarchy_duplicates_and_bundles():
    gcc = spec("gcc", "12.2.0")
    cce = spec("cce", "17.0.0")
    mpich = spec("cray-mpich", "8.1.28", external={"path": None, "module": ["cray-mpich/8.1.28"]})
    fdb_cce = spec("fdb", "5.13", deps=[(cce, ["c", "cxx"])], craype="cce")
    fdb_gnu = spec("fdb", "5.13", deps=[(gcc, ["c", "cxx"])], craype="gnu")
    ior = spec("ior", "3.3.0", deps=[(gcc, ["c"]), (mpich, ["mpi"])])
    bundle = spec("nwp-env", "1.0", build_system="bundle")
    lock = lock_of(fdb_cce, fdb_gnu, ior, bundle, mpich, others=(gcc, cce))
    lock["roots"].append(dict(lock["roots"][0]))  # unify:false locks repeat roots
    roots = {r.key: r for r in stack.root_specs(lock, core_compilers=("gcc@12.2.0",))}
    assert set(roots) == {"fdb@5.13%cce", "fdb@5.13%gnu", "ior@3.3.0", "nwp-env@1.0",
                          "cray-mpich@8.1.28"}
    assert roots["fdb@5.13%cce"].modules_to_load() == ["cce/17.0.0", "fdb/5.13"]
    assert roots["fdb@5.13%gnu"].modules_to_load() == ["fdb/5.13"]
    assert roots["ior@3.3.0"].modules_to_load() == ["cray-mpich/8.1.28", "ior/3.3.0"]
    assert roots["cray-mpich@8.1.28"].modules_to_load() == ["cray-mpich/8.1.28"]
    query = smoke.version_query(roots["nwp-env@1.0"])
    assert smoke.reported_version("iostack-smoke: LOADEDMODULES=eccodes/2.41:nwp-env/1.0:fdb/5",
                                  query) == "1.0"


@pytest.mark.parametrize("name,output,version", [
    ("eccodes", "\necCodes Version 2.28.0\n\n", "2.28.0"),
    ("fdb", "5.10.8\n", "5.10.8"),
    ("openmpi", "mpirun (Open MPI) 4.1.4\n\nReport bugs", "4.1.4"),
    ("openfoam", "Using: OpenFOAM- (1912) - visit www.openfoam.com\n", "1912"),
    ("openfoam", "Using: OpenFOAM-v2312 (2312) - visit www.openfoam.com\n", "2312"),
    ("fio", "fio-3.33\n", "3.33"),
    ("nvme-stage", "nvme-stage 1.0.0\n", "1.0.0"),
    ("parallel-netcdf", "PnetCDF 1.12.3\n", "1.12.3"),
])
def test_version_queries_read_what_the_programs_print(name, output, version):
    assert smoke.reported_version(output, smoke.VERSION_QUERIES[name]) == version


def test_a_program_that_states_no_version_reports_none():
    assert smoke.reported_version("fio: command not found\n", smoke.VERSION_QUERIES["fio"]) is None


def test_loaded_modules_come_from_the_jobs_line():
    assert smoke.loaded_modules("x\niostack-smoke: LOADEDMODULES=fdb/5.10.8:eckit/1.20.2\n") == {
        "fdb/5.10.8", "eckit/1.20.2"}
    assert smoke.loaded_modules("iostack-smoke: LOADEDMODULES=\n") == set()
    with pytest.raises(ValueError):
        smoke.loaded_modules("no such line")
