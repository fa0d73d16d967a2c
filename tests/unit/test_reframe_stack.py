"""The smoke check's package list comes from each site's spack.lock, with a version query
for every root of the local site and the modules the Lmod hierarchy needs."""
import pytest

from iostack.deployment import stack
from iostack.site import facts
from iostack.site.target import SpackEnv
from iostack_rfm.parsers import smoke


def test_local_roots_come_from_the_lock_each_with_its_program():
    roots = {r.name: r for r in stack.roots_of(SpackEnv("local"))}
    assert {"eccodes", "fdb", "eckit", "metkit", "ior", "io500", "netcdf-output-bench",
            "nvme-stage", "fdb-archive-bench", "fio", "darshan-runtime", "darshan-util"} <= set(roots)
    # metkit is a library (its version query is pkg-config's); every other root has a
    # program, which must be the installed spec's
    assert {r.name for r in roots.values() if smoke.program(r) is None} == {"metkit"}
    # Spack's installed spec gives every version; io500 and fdb-archive-bench print none
    assert {r.name for r in roots.values() if smoke.version_query(r) is None} == {
        "io500", "fdb-archive-bench"}
    # Debian's ecCodes is an external; the rest is Spack-built, the MPI programs and
    # libraries below Open MPI in the Lmod hierarchy
    assert roots["eccodes"].is_external and roots["eccodes"].external_prefix == "/usr"
    assert not roots["fdb"].is_external
    assert roots["fdb"].modules_to_load() == ["openmpi/4.1.4", "fdb/5.13.106"]
    assert roots["nvme-stage"].modules_to_load() == ["nvme-stage/1.1.0"]
    # what the smoke check's environment must offer: gcc builds run in a `+gnu` one
    assert {r.name: r.compiler for r in roots.values()} == {
        "eccodes": "", "eckit": "gcc", "metkit": "gcc", "fdb": "gcc", "multio": "gcc",
        "ior": "gcc", "io500": "gcc", "netcdf-output-bench": "gcc", "nvme-stage": "",
        "fdb-archive-bench": "gcc", "fio": "", "darshan-runtime": "gcc", "darshan-util": "gcc"}


def test_cray_builds_are_named_by_their_programming_environment():
    compilers = {(r.name, r.compiler) for r in stack.roots_of(SpackEnv("cray-ex"))}
    assert {("fdb", "cce"), ("fdb", "gnu"), ("ior", "gcc")} <= compilers


@pytest.mark.parametrize("site", facts.spack_sites())
def test_every_site_lock_parses_into_unique_keys(site):
    roots = stack.roots_of(SpackEnv(site))
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


def test_the_program_on_path_must_be_the_installed_specs():
    (fdb,) = [r for r in stack.roots_of(SpackEnv("local")) if r.name == "fdb"]
    out = ("iostack-smoke: installed fdb 5.13.106 /d/opt/fdb-5.13.106-abcdefg\n"
           "iostack-smoke: on PATH fdb-info {}\n")
    assert smoke.installed(out) == {"name": "fdb", "version": "5.13.106",
                                    "prefix": "/d/opt/fdb-5.13.106-abcdefg"}
    assert smoke.program_problems(out.format("/d/opt/fdb-5.13.106-abcdefg/bin/fdb-info"),
                                  fdb) == []
    # without its module, Debian's comes first
    assert smoke.program_problems(out.format("/usr/bin/fdb-info"), fdb) == [
        "fdb-info on PATH is /usr/bin/fdb-info, not the installed fdb's "
        "(/d/opt/fdb-5.13.106-abcdefg)"]
    assert smoke.program_problems(out.format(""), fdb) == ["fdb-info is not on PATH"]
    with pytest.raises(ValueError):
        smoke.installed("==> Error: No package matches the query: /abcdefg\n")


@pytest.mark.parametrize("summary,status", [
    # `spack test run` of one spec, as Spack 1.1 ends it
    ("============================== 1 passed of 1 spec ==============================", "passed"),
    ("============================= 1 no_tests of 1 spec =============================", "no-tests"),
    ("============================= 1 skipped of 1 spec ==============================", "skipped"),
    ("============================== 1 failed of 1 spec ==============================", "failed"),
    ("==> Error: 1 test(s) in the suite failed.", "unknown"),
])
def test_what_spack_test_run_said(summary, status):
    out = f"==> Spack test smoke-x\n==> Testing package x-1.0-abcdefg\n{summary}\n"
    assert smoke.spack_test_status(out) == status
    problems = smoke.spack_test_problems(out, "iostack-smoke: spack test rc=0\n")
    assert (problems == []) == (status in ("passed", "no-tests", "skipped"))


def test_an_environment_of_a_site_has_the_sites_core_compiler():
    """local/nwp includes local's modules.yaml: its packages sit in Core under gcc as the
    site's own do (a `gcc/12.2.0` level, which the tree has not, kept openifs-env from loading)."""
    assert stack.core_compilers(SpackEnv("local", "nwp")) == stack.core_compilers(SpackEnv("local")) == ("gcc@12.2.0",)
    roots = {r.name: r for r in stack.roots_of(SpackEnv("local", "nwp"))}
    assert roots["openifs"].hierarchy == roots["fdb"].hierarchy == ("openmpi/4.1.4",)
