"""`bin/iostack site init`: a site made from what Spack, dpkg, ReFrame and Slurm printed on
real nodes (tests/data/site-init/README.md says where each came from), checked as every
committed site is (tests/unit/test_site_facts.py), written all or none, and refused when the
name is taken."""
import os
import pathlib
import shutil

import pytest
import yaml

import test_site_facts
from iostack.core import paths
from support import targets
from iostack.offline import siteinit
from iostack.site import facts as sites
from iostack.site import generate

DATA = pathlib.Path(__file__).parent.parent / "data" / "site-init"


@pytest.fixture(autouse=True)
def _fresh_facts():
    sites.load.cache_clear()
    yield
    sites.load.cache_clear()


@pytest.fixture
def trixie():
    return siteinit.Findings.from_records("trixie-node", DATA / "trixie")


@pytest.fixture
def cluster():
    return siteinit.Findings.from_records("clusternode", DATA / "local-cluster")


@pytest.fixture
def repo_copy(monkeypatch, tmp_path):
    """The trees site init writes into, copied, with every path pointing there."""
    for tree in ("sites", "spack-env", "ansible/inventories", "reframe-tests/config"):
        shutil.copytree(paths.REPO / tree, tmp_path / tree, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(paths, "REPO", tmp_path)
    monkeypatch.setattr(paths, "REFRAME_DIR", tmp_path / "reframe-tests")
    monkeypatch.setattr(sites, "FACTS", tmp_path / "sites")
    monkeypatch.setattr(paths, "SPACK_ENV_SITES", tmp_path / "spack-env" / "sites")
    monkeypatch.setattr(paths, "ANSIBLE_INVENTORIES", tmp_path / "ansible" / "inventories")
    return tmp_path


def tree_listing(root: pathlib.Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else b""
            for p in sorted(root.rglob("*"))}


# ---- Debian 13: what site init found there ------------------------------------------------

def test_the_debian_13_node_as_spack_names_it(trixie):
    facts = siteinit.facts(trixie)
    assert (facts["os"], facts["libc"], facts["scheduler"]) == ("debian13", "glibc@2.41", "local")
    compute = facts["nodes"]["compute"]
    # ReFrame's topology: one socket of 2 cores, no SMT, one NUMA node
    assert compute["cpu"] == {"target": "x86_64_v4", "model": "AMD EPYC", "sockets": 1,
                              "cores_per_socket": 2}
    assert (compute["smt"], compute["nps"]) == (False, 1)


def test_debian_13s_externals_and_their_packages(trixie):
    found, left = siteinit.externals(trixie)
    got = {e.entry["spec"].split()[0].split("+")[0].split("~")[0]: (e.entry["prefix"], e.debian)
           for e in found}
    assert got["gcc@14.2.0"] == ("/usr", "gcc-14-x86-64-linux-gnu")
    assert got["openmpi@5.0.7"] == ("/usr", "openmpi-bin")
    assert got["eccodes@2.41.0"] == ("/usr", "libeccodes-tools")
    # Debian's parallel netCDF-C in a prefix of its own, found by its pkg-config file
    assert got["netcdf-c@4.9.3"] == ("/usr/lib/x86_64-linux-gnu/netcdf/mpi", "libnetcdf-mpi-dev")
    # whose pnetcdf.pc names a build directory: the library's prefix instead, and the link
    # name's package (headers), not the run-time library's
    assert got["parallel-netcdf@1.14.0"] == ("/usr", "libpnetcdf-dev")
    assert got["python@3.13.5"] == ("/usr", "python3.13-minimal")
    assert got["cmake@3.31.6"] == ("/usr", "cmake")
    assert left == []
    eccodes = next(e for e in found if e.package == "eccodes")
    assert eccodes.entry["spec"] == "eccodes@2.41.0+aec+fortran+netcdf+tools"


def test_debian_13s_spack_site(trixie):
    packages = yaml.safe_load(siteinit.packages_yaml(trixie))["packages"]
    # the template's target is the facts' (generated when the site is written)
    assert packages["all"] == {"require": ["target=[[ facts.target ]]"]}
    assert (packages["mpi"], packages["c"], packages["pkgconfig"], packages["yacc"]) == (
        {"require": "openmpi"}, {"require": "gcc"}, {"require": "pkgconf"}, {"require": "bison"})
    (gcc,) = packages["gcc"]["externals"]
    assert gcc["extra_attributes"]["compilers"] == {"c": "/usr/bin/gcc", "cxx": "/usr/bin/g++",
                                                    "fortran": "/usr/bin/gfortran"}
    assert all(p["buildable"] is False for p in packages.values() if "externals" in p)
    # a template: the facts' grib_definitions (none here) are generated into it
    template = siteinit.modules_yaml(trixie)
    assert template.endswith("\n[[- eccodes_modules(facts) ]]\n")
    modules = yaml.safe_load(template.removesuffix("[[- eccodes_modules(facts) ]]\n"))
    assert modules["modules"]["default"]["lmod"]["core_compilers"] == ["gcc@14.2.0"]
    spack_yaml = yaml.safe_load(siteinit.spack_yaml(trixie))["spack"]
    local = yaml.safe_load((paths.SPACK_ENV_SITES / "local" / "spack.yaml").read_text())["spack"]
    assert spack_yaml == local


def test_the_summary_names_what_was_found(trixie):
    text = siteinit.summary(trixie)
    assert "linux-debian13-x86_64_v4, glibc@2.41" in text
    assert "1 socket(s), 2 CPUs, 1 per core, 1 NUMA node(s)" in text
    assert "Slurm:    none answers here: the local scheduler" in text
    assert "left out" not in text


# ---- written, and checked as every committed site is --------------------------------------

def test_the_written_site_agrees_with_itself_as_every_site_must(trixie, repo_copy):
    siteinit.write(trixie, siteinit.site_files(trixie))
    assert sites.load("trixie-node").os == "debian13"
    # generated from its templates with the facts, as every committed site is
    assert generate.stale("trixie-node") == []
    assert test_site_facts.choice_problems("trixie-node") == []
    packages = yaml.safe_load(
        (paths.SPACK_ENV_SITES / "trixie-node" / "packages.yaml").read_text())["packages"]
    assert packages["all"] == {"require": ["target=x86_64_v4"]}
    site_vars = yaml.safe_load((repo_copy / "ansible/inventories/trixie-node/group_vars/all/"
                                "10-site.yml").read_text())
    assert site_vars["iostack_site"] == "trixie-node"
    # all that a site needs but the lock, which `bin/iostack lock --update` makes
    assert test_site_facts.what_is_missing("trixie-node") == [
        "trixie-node: no spack-env/sites/trixie-node/spack.lock (run `bin/iostack lock "
        "--update <site>` and commit it)"]
    link = repo_copy / "ansible/inventories/trixie-node/group_vars/all/00-common.yml"
    assert os.readlink(link) == "../../../common/group_vars/all.yml" and link.is_file()


def test_a_taken_name_is_refused_and_nothing_is_written(trixie, repo_copy):
    before = tree_listing(repo_copy)
    for name in ("local", "local-slurm", "cray-ex"):
        with pytest.raises(siteinit.SiteInitError, match=rf"site {name} exists \("):
            siteinit.main(targets.settings(), name, records=DATA / "trixie")
    assert tree_listing(repo_copy) == before
    with pytest.raises(siteinit.SiteInitError, match="is not lower-case letters"):
        siteinit.main(targets.settings(), "Trixie_Node", records=DATA / "trixie")


def test_a_failure_while_moving_into_place_leaves_nothing(trixie, repo_copy, monkeypatch):
    """The third tree cannot be moved: the two moved before are taken back."""
    before = tree_listing(repo_copy)
    real_rename, calls = os.rename, []

    def rename(src, dst):
        calls.append(dst)
        if len(calls) == 3:
            raise OSError(28, "No space left on device", str(dst))
        return real_rename(src, dst)

    monkeypatch.setattr(siteinit.os, "rename", rename)
    with pytest.raises(OSError):
        siteinit.write(trixie, siteinit.site_files(trixie))
    assert len(calls) == 3
    assert tree_listing(repo_copy) == before
    assert not list(repo_copy.glob(".site-init-*"))


def test_facts_that_do_not_validate_write_nothing(trixie, repo_copy):
    before = tree_listing(repo_copy)
    files = siteinit.site_files(trixie)
    files["sites/trixie-node.yaml"] = files["sites/trixie-node.yaml"].replace(
        "target: x86_64_v4", "target: zen9")
    with pytest.raises(siteinit.SiteInitError, match="'zen9' is not a Spack"):
        siteinit.write(trixie, files)
    assert tree_listing(repo_copy) == before


def test_the_reframe_configuration_builds_the_new_sites_system(trixie, repo_copy, monkeypatch,
                                                                tmp_path):
    """The facts make the system: site init writes reframe-tests/config/<site>.py, which only
    builds it from them."""
    import test_reframe_config

    siteinit.write(trixie, siteinit.site_files(trixie))
    assert "trixie-node" in sites.reframe_systems()
    assert (repo_copy / "reframe-tests" / "config" / "trixie-node.py").is_file()
    config = test_reframe_config.load_config(monkeypatch, tmp_path / "state")
    system = test_reframe_config.systems(config)["trixie-node"]
    (partition,) = system["partitions"]
    assert partition["processor"] == sites.load("trixie-node").nodes["compute"].reframe_processor()
    assert partition["processor"]["num_cpus"] == 2
    assert {"fdb", "grib", "mpi"} <= set(partition["features"])
    envs = {e["name"]: e for e in config["environments"]}
    assert "trixie-node" in envs["stack"]["target_systems"]
    assert "trixie-node" in envs["builtin"]["target_systems"]
    # the sites written there keep theirs
    assert {"local", "local-slurm", "local-cluster", "cray-ex", "oci-bm-optimized3"} <= set(
        test_reframe_config.systems(config))


# ---- a Slurm cluster --------------------------------------------------------------------------

def test_slurm_partitions_become_node_groups(cluster):
    assert [(p.partition, p.nodes) for p in cluster.slurm] == [
        ("compute-nps1", "node[1-3]"), ("compute-nps2", "node4")]
    facts = siteinit.facts(cluster)
    assert facts["scheduler"] == "slurm"
    nps1, nps2, login = (facts["nodes"][g] for g in ("compute-nps1", "compute-nps2", "login"))
    assert (nps1["hosts"], nps1["hostnames"]) == (["node[1:3]"], [r"node\d+"])
    assert (nps2["hosts"], nps2["hostnames"]) == (["node4"], ["node4"])
    assert nps1["slurm"] == {"partition": "compute-nps1"}
    assert nps1["cpu"] == {"target": "x86_64_v4", "sockets": 1, "cores_per_socket": 2}
    assert login == {"hosts": ["vm"], "hostnames": ["vm"]}


def test_a_cluster_site_says_os_target_and_libc_on_every_external(cluster, repo_copy):
    siteinit.write(cluster, siteinit.site_files(cluster))
    facts = sites.load("clusternode")
    packages = yaml.safe_load(
        (paths.SPACK_ENV_SITES / "clusternode" / "packages.yaml").read_text())["packages"]
    node = f"os={facts.os} target={facts.target}"
    specs = [e["spec"] for entry in packages.values() for e in entry.get("externals", [])]
    assert packages["all"] == {"require": [node]} and f"{facts.libc} {node}" in specs
    assert specs and all(spec.endswith(node) for spec in specs)
    # the repository is on the node's own disk: the inventory check names it, as the
    # summary's warning does
    assert test_site_facts.choice_problems("clusternode") == [
        f"ansible/inventories/clusternode: iostack_root {repo_copy}/deploy/clusternode is on "
        f"no shared file system the facts' nodes/{group} mount"
        for group in ("compute-nps1", "compute-nps2")]
    assert "a local file system: the compute nodes cannot see deploy/" in siteinit.summary(cluster)


def test_what_no_debian_package_owns_is_left_out(cluster):
    """The CI machine's pyenv python (a shim in /root/.pyenv) is on PATH: set-up could not
    give it to another node."""
    found, left = siteinit.externals(cluster)
    assert [e.entry["prefix"] for e in found if e.package == "python"] == ["/usr"]
    (line,) = left
    assert line.startswith("python@3.11.7") and "/root/.pyenv/shims: no Debian package owns" in line


@pytest.mark.parametrize("nodes,patterns", [
    ("node[1-3]", ["node[1:3]"]),                   # scontrol's, tests/data/site-init
    ("node4", ["node4"]),
    ("nid[001000-001003,001007],uan01", ["nid[001000:001003]", "nid001007", "uan01"]),
])
def test_slurm_host_lists_as_ansible_patterns(nodes, patterns):
    assert siteinit.slurm_hosts_as_ansible(nodes) == patterns


def test_dpkg_answers_are_read_as_dpkg_query_prints_them():
    owners = siteinit.dpkg_owners((DATA / "trixie" / "dpkg-S.txt").read_text()
                                  + "diversion by dash from: /bin/sh\n"
                                  "libc6:amd64, libc6-dev:amd64: /usr/lib/x86_64-linux-gnu\n")
    assert owners["/usr/lib/x86_64-linux-gnu/libpnetcdf.so"] == ["libpnetcdf-dev"]
    assert owners["/usr/lib/x86_64-linux-gnu"] == ["libc6", "libc6-dev"]
    assert "/bin/sh" not in owners


# ---- the command --------------------------------------------------------------------------

def test_the_command_refuses_an_existing_site_in_one_line(iostack):
    before = tree_listing(paths.REPO / "sites")
    p = iostack("site", "init", "local", "--from-records", str(DATA / "trixie"))
    assert p.returncode == 2
    assert p.stderr.splitlines() == ["iostack: error: site local exists (sites/local.yaml, "
                                     "spack-env/sites/local, ansible/inventories/local): "
                                     "nothing written"]
    assert tree_listing(paths.REPO / "sites") == before


def test_the_command_shows_what_it_found_and_a_dry_run_writes_nothing(iostack):
    p = iostack("site", "init", "trixie-node", "--from-records", str(DATA / "trixie"),
                "--dry-run")
    assert p.returncode == 0, p.stderr
    assert "site trixie-node: Debian GNU/Linux 13 (trixie) on vm" in p.stdout
    assert "netcdf-c@4.9.3+mpi" in p.stdout
    assert "--dry-run: would write" in p.stdout
    assert not (paths.REPO / "sites" / "trixie-node.yaml").exists()


def test_site_init_looks_for_every_external_local_takes():
    """Site init searches for what the stack takes from the system: local's externals."""
    local = yaml.safe_load((paths.SPACK_ENV_SITES / "local" / "packages.yaml").read_text())
    taken = {name for name, entry in local["packages"].items() if entry.get("externals")}
    assert taken - {"gcc"} <= set(siteinit.STACK_EXTERNALS)


def test_a_new_site_builds_locals_stack_as_local_builds_it(trixie):
    """Its environment is local's, and so are the versions local requires: without them a
    Debian 13 node's ecCodes 2.41 lets Spack take MultIO 2.2.2, whose atlas needs sources
    the mirror has not (eigen 5.0.0)."""
    files = siteinit.site_files(trixie)
    spack_yaml = files["spack-env/sites/trixie-node/spack.yaml"]
    local = (paths.SPACK_ENV_SITES / "local" / "spack.yaml").read_text()
    assert spack_yaml.endswith(local[local.index("spack:"):])
    packages = yaml.safe_load(files["spack-env/sites/trixie-node/packages.yaml.in"])["packages"]
    assert packages["multio"] == {"require": "@1.5.1"}
    assert packages["ecbuild"] == {"version": ["3.7.2"]}
    # the node's own choices stay its own: no provider of local's (OpenBLAS) is carried over
    assert "blas" not in packages and "openblas" not in packages
