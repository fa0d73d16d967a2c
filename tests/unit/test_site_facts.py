"""Each site is described once, in sites/<site>.yaml. The facts validate; the Spack site and
the Ansible inventory of each site agree with them (the ReFrame systems read them:
tests/unit/test_reframe_config.py); and a new facts file without its other parts fails here,
each message naming a part that is missing."""
import pathlib
import shutil

import pytest
import yaml
from ansible.plugins.inventory import detect_range, expand_hostname_range

from iostack import cli
from iostack.core import paths
from iostack.site import facts as site_facts
from iostack.site import generate


@pytest.fixture(autouse=True)
def _fresh_facts():
    site_facts.load.cache_clear()
    yield
    site_facts.load.cache_clear()


# ---- what a site must have besides its facts ---------------------------------------------

SPACK_PARTS = {
    "spack.yaml": "the environment: includes packages.yaml, modules.yaml, ../../common/*.yaml "
                  "and the templates whose specs it builds",
    "packages.yaml": "externals (compilers, MPI, the libc and OS of the facts) and all: require",
    "modules.yaml": "lmod core_compilers: the site's system compiler",
    "spack.lock": "run `bin/iostack lock --update <site>` and commit it",
}
INVENTORY_PARTS = {
    "hosts.yml": "groups compute (the node groups with a bmc) and deploy",
    "group_vars/all/00-common.yml": "a symlink to ../../../common/group_vars/all.yml",
    "group_vars/all/10-site.yml": "iostack_site, iostack_root, iostack_repo_dir",
}


def what_is_missing(site: str) -> list[str]:
    """One line per part of the site that is missing, saying what to put there."""
    facts = site_facts.load(site)
    missing = []
    for part, what in SPACK_PARTS.items():
        if not (paths.SPACK_ENV_SITES / site / part).is_file():
            missing.append(f"{site}: no spack-env/sites/{site}/{part} ({what})")
    for part, what in INVENTORY_PARTS.items():
        if not (paths.ANSIBLE_INVENTORIES / site / part).is_file():
            missing.append(f"{site}: no ansible/inventories/{site}/{part} ({what})")
    if not paths.reframe_config(site).is_file():
        missing.append(f"{site}: no reframe-tests/config/{site}.py (its ReFrame systems "
                       f"{', '.join(facts.systems)}: bin/iostack site generate {site})")
    return missing


@pytest.mark.parametrize("site", site_facts.names())
def test_every_site_has_its_spack_site_inventory_and_reframe_systems(site):
    assert what_is_missing(site) == []


def test_every_tree_names_only_sites_with_facts():
    facts = set(site_facts.names())
    systems = {s for site in facts for s in site_facts.load(site).systems}
    assert set(site_facts.spack_sites()) - facts == set()
    # an inventory per site, or per system of a site with nodes of its own (local-cluster)
    assert set(site_facts.ansible_sites()) - facts - systems == set()
    assert generate.orphans() == []
    assert [site_facts.site_of_system(s) for s in ("local", "local-slurm", "local-cluster",
                                                   "cray-ex")] == ["local", "local", "local", "cray-ex"]
    with pytest.raises(site_facts.FactsError, match="no sites/<site>.yaml lists ReFrame system 'nowhere'"):
        site_facts.site_of_system("nowhere")


def test_a_new_facts_file_alone_fails_naming_every_missing_part(monkeypatch, tmp_path):
    """What a newcomer sees after writing sites/newsite.yaml and nothing else (`bin/iostack
    site init` writes them all, `bin/iostack site generate` the ReFrame configuration)."""
    shutil.copytree(site_facts.FACTS, tmp_path, dirs_exist_ok=True)
    facts = yaml.safe_load((site_facts.FACTS / "oci-bm-optimized3.yaml").read_text())
    facts["name"] = "newsite"
    (tmp_path / "newsite.yaml").write_text(yaml.safe_dump(facts))
    monkeypatch.setattr(site_facts, "FACTS", tmp_path)

    missing = what_is_missing("newsite")
    named = "\n".join(missing)
    for part in [*SPACK_PARTS, *INVENTORY_PARTS, "reframe-tests/config/newsite.py"]:
        assert part in named, f"{part} not named in:\n{named}"
    assert len(missing) == len(SPACK_PARTS) + len(INVENTORY_PARTS) + 1
    assert "newsite" in site_facts.reframe_systems()


# ---- the facts files themselves ----------------------------------------------------------

def test_cray_ex_is_archer2_class_zen2():
    cray = site_facts.load("cray-ex")
    compute = cray.nodes["compute"]
    assert (cray.os, cray.libc, cray.target) == ("sles15", "glibc@2.31", "zen2")
    assert compute.cpu["model"] == "AMD EPYC 7742"
    # [ARCHER2-Hardware]: 256 hardware threads; every srun asks for one task per core, so a
    # job's tasks see 128 CPUs, as EPCC's own ReFrame configuration says [EPCC-ReFrame]
    assert compute.smt is True
    assert compute.srun_options() == ["--hint=nomultithread", "--distribution=block:block"]
    assert compute.reframe_processor() == {
        "arch": "zen2", "vendor": "AMD", "model": "AMD EPYC 7742", "num_cpus": 128,
        "num_cpus_per_core": 1, "num_cpus_per_socket": 64, "num_sockets": 2}
    assert compute.summary() == "2 x 64-core AMD EPYC 7742, SMT on, NPS4"
    assert cray.io_features("compute") == ["lustre"]
    assert compute.bmc_address_of("nid001000") == "nid001000-bmc"
    assert cray.programming_environment["release"] == "23.09"


def test_setonix_is_a_cray_ex_in_service_and_differs_in_facts_only():
    """[Pawsey-Setonix] [Pawsey-Spack]: 2 x 64-core Milan (zen3), SMT on, NPS4, 256 GB; CPE
    25.03 (CCE 19.0.0, gcc 14.2.0, cray-mpich 8.1.32); partition work, nodes shared unless a
    job asks for them whole; /scratch for jobs' data; the project Pawsey's own jobs charge."""
    setonix = site_facts.load("setonix")
    compute = setonix.nodes["compute"]
    assert (setonix.os, setonix.libc, setonix.target) == ("sles15", "glibc@2.31", "zen3")
    assert compute.summary() == "2 x 64-core AMD EPYC 7763, SMT on, NPS4"
    assert compute.memory_mib() == 256 * 1024
    assert compute.slurm_access() == ["--partition=work", "--exclusive"]
    assert compute.choice_access("short") == ["--partition=debug"]
    assert setonix.slurm_account() == "pawsey0001" and not setonix.account["required"]
    pe = setonix.programming_environment
    assert pe["release"] == "25.03" and pe["mpi"] == "cray-mpich@8.1.32"
    assert {e["compiler"] for e in pe["prgenvs"].values()} == {"cce@19.0.0", "gcc@14.2.0"}
    assert setonix.io_features("compute") == ["lustre"]
    # what it shares with cray-ex is the shape of its facts: the same keys, other values
    cray = yaml.safe_load((site_facts.FACTS / "cray-ex.yaml").read_text())
    mine = yaml.safe_load((site_facts.FACTS / "setonix.yaml").read_text())
    assert set(mine) == set(cray) and set(mine["programming_environment"]) == set(
        cray["programming_environment"])


def test_cray_ex_serial_nodes_are_shared_data_analysis_nodes():
    """[ARCHER2-Analysis]: jobs share the nodes and ask for cores and memory; the QoS caps
    what one user holds at once (32 cores, 125 GB), which ReFrame's jobs there fit in."""
    cray = site_facts.load("cray-ex")
    serial = cray.nodes["serial"]
    assert serial.slurm_access() == ["--partition=serial", "--qos=serial", "--mem=16G"]
    assert serial.reframe_processor()["num_cpus"] == 8
    assert serial.hostnames == ("dvn\\d+",)
    jobs_at_once = 4    # reframe-tests/iostack_rfm/config.py: the serial partition's max_jobs
    assert jobs_at_once * serial.slurm["cpus"] <= 32
    assert jobs_at_once * int(serial.slurm["mem"].rstrip("G")) <= 125


def test_the_account_a_job_charges(tmp_path):
    """[ARCHER2-Scheduler]: sbatch refuses a job without --account. The facts give one, the
    operator may give another of the centre's form; where the centre requires one and none
    is given, one line says so before anything is submitted; a site that needs none gets
    none."""
    cray = site_facts.load("cray-ex")
    assert cray.slurm_account() == "x01"
    assert cray.slurm_account("t01-test") == "t01-test"
    with pytest.raises(site_facts.FactsError) as e:
        cray.slurm_account("project_465000001")
    assert "not of the form its centre's accounts have" in str(e.value)
    data = yaml.safe_load((site_facts.FACTS / "cray-ex.yaml").read_text())
    del data["account"]["name"]
    path = tmp_path / "cray-ex.yaml"
    path.write_text(yaml.safe_dump(data))
    nameless = site_facts.read(path)
    with pytest.raises(site_facts.FactsError) as e:
        nameless.slurm_account()
    assert str(e.value) == (
        "site cray-ex: its scheduler refuses every job without an account (sites/cray-ex.yaml "
        "account.required): give one with --account NAME or as sites/cray-ex.yaml "
        "account.name; nothing was submitted")
    assert nameless.slurm_account("t01") == "t01"
    assert site_facts.load("local").slurm_account() is None


def test_a_file_system_some_nodes_do_not_mount_is_no_scratch_of_theirs(tmp_path):
    """ARCHER2's /home is not on its compute nodes [ARCHER2-Data]: a scratch there is refused."""
    data = yaml.safe_load((site_facts.FACTS / "cray-ex.yaml").read_text())
    data["nodes"]["compute"]["scratch"] = "/home/x01/iostack-rfm"
    path = tmp_path / "cray-ex.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(site_facts.FactsError) as e:
        site_facts.read(path)
    assert str(e.value) == (f"{path}: nodes/compute/scratch: /home/x01/iostack-rfm is on none "
                            "of the file_systems these nodes mount (/work, /mnt/lustre/a2fs-nvme)")


def test_oci_has_one_group_per_nps_mode_on_node_local_nvme():
    oci = site_facts.load("oci-bm-optimized3")
    nps = {g.nps: g for g in oci.nodes.values() if g.nps is not None}
    assert sorted(nps) == [1, 2]
    for mode, group in nps.items():
        # select/linear: whole nodes, which jobs ask for [OCI-Tips-Slurm]
        assert group.slurm_access() == [f"--partition=nps{mode}", "--exclusive"]
        assert group.reframe_processor()["num_cpus"] == 36
        assert oci.file_system_of(group.scratch) == {"mount": "/mnt/localdisk", "type": "nvme",
                                                     "shared": False}
        # Oracle Japan's stack: MpiDefault=pmix, so srun needs no --mpi [OCI-Tips-Slurm]; UCX
        # on the cluster-network NIC
        assert group.mpi_launcher_options() == []
        assert group.rdma == {"device": "mlx5_2", "port": 1, "traffic_class": 105,
                              "gid_index": 3}
    assert oci.io_features("compute-nps1") == ["nvme"]


LOCAL_CLUSTER = """
name: local-cluster
description: three Slurm nodes in network namespaces of this machine
os: debian12
libc: glibc@2.36
scheduler: slurm
systems: [local-cluster]
file_systems:
- {mount: /var/lib/iostack-cluster, type: local}
nodes:
  compute:
    hosts: [node1, node2, node3]
    hostnames: ['node\\d+']
    cpu: {target: x86_64, sockets: 1, cores_per_socket: 1}
    scratch: /var/lib/iostack-cluster/{host}/scratch
    slurm: {partition: iostack}
    bmc: {method: none}
"""


def test_a_multi_node_cluster_with_scratch_per_node_is_described(tmp_path):
    path = tmp_path / "local-cluster.yaml"
    path.write_text(LOCAL_CLUSTER)
    cluster = site_facts.read(path)
    compute = cluster.nodes["compute"]
    scratches = [compute.scratch_of(h) for h in compute.hosts]
    assert scratches == [f"/var/lib/iostack-cluster/node{i}/scratch" for i in (1, 2, 3)]
    assert compute.slurm_access() == ["--partition=iostack"]
    assert compute.reframe_processor()["num_cpus"] == 1


@pytest.mark.parametrize("change,message", [
    ({"libc": None}, "top level: 'libc' is a required property"),
    ({"nodes.compute.nps": 3}, "nodes/compute/nps: 3 is not one of [0, 1, 2, 4]"),
    ({"nodes.compute.cpu.target": "zen9"}, "'zen9' is not a Spack (archspec) target"),
    ({"nodes.compute.cpu.vendor": "Intel"}, "target zen2 is a AuthenticAMD CPU, not Intel"),
    ({"nodes.compute.scratch": "/scratch/x"}, "/scratch/x is on none of the file_systems"),
    ({"nodes.compute.slurm.shared": True}, "nodes/compute/slurm: 'cpus' is a required property"),
    ({"file_systems": [{"mount": "/work", "type": "lustre", "nodes": ["gpu"]}]},
     "file_systems: /work names node groups ['gpu'] that nodes does not have"),
    ({"nodes.compute.bmc": {"method": "redfish"}}, "'address' is a required property"),
    ({"nodes.compute.slurm": None}, "compute nodes of a Slurm site need slurm: partition"),
    ({"name": "other"}, "name 'other' differs from the file's name 'cray-ex'"),
    ({"nodes.compute.hostnames": ["nid(\\d+"]}, "is not a regular expression"),
    ({"account.name": "project_465000001"}, "account/name: 'project_465000001' is not of the form"),
    ({"account.pattern": "[a-"}, "account/pattern: '[a-' is not a regular expression"),
    ({"nodes.compute.cpu_frequency.performance_khz": 2800000},
     "nodes/compute/cpu_frequency/performance_khz: 2800000 is not one of available_khz"),
])
def test_wrong_facts_are_one_line_naming_the_file_and_field(tmp_path, change, message):
    data = yaml.safe_load((site_facts.FACTS / "cray-ex.yaml").read_text())
    for dotted, value in change.items():
        *parents, key = dotted.split(".")
        node = data
        for p in parents:
            node = node[p]
        if value is None:
            del node[key]
        else:
            node[key] = value
    path = tmp_path / "cray-ex.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(site_facts.FactsError) as e:
        site_facts.read(path)
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value)
    assert "\n" not in str(e.value)


def test_the_cli_refuses_a_site_whose_facts_are_wrong(monkeypatch, tmp_path, capsys):
    (tmp_path / "local.yaml").write_text("name: local\n")
    monkeypatch.setattr(site_facts, "FACTS", tmp_path)
    assert cli.main(["deploy", "--site", "local"]) == 2
    err = capsys.readouterr().err
    assert "local.yaml: top level: 'description' is a required property" in err
    assert err.startswith("iostack: error: ") and err.count("\n") == 1


# ---- what the generated trees cannot say: choices checked against the facts -------------
#
# Every fact the Spack site and the inventory hold is generated from the facts
# (iostack.site.generate; tests/unit/test_site_generated.py compares). What remains are the
# hand-written choices that must fit the facts: where the stack is installed, which
# directories get Lustre striping, which NPS a node shape offers, and that a template
# covers every node group the facts give a BMC.

BIOS_DEFAULTS = yaml.safe_load((paths.REPO / "ansible/roles/bios/defaults/main.yml").read_text())


def _hosts(patterns):
    """Host names of Ansible host patterns (`nid[001000:001003]`)."""
    return [h for p in patterns for h in (expand_hostname_range(p) if detect_range(p) else [p])]


def _inventory(site):
    """{group: (hosts, parent)} of hosts.yml, and a host's variables group_vars layer by layer
    (all/*.yml, then each group from the outermost parent in), as Ansible merges them."""
    inv = paths.ANSIBLE_INVENTORIES / site
    groups = {}

    def walk(name, body, parent):
        body = body or {}
        hosts = _hosts(body.get("hosts") or {})
        groups[name] = (hosts, parent)
        for child, child_body in (body.get("children") or {}).items():
            walk(child, child_body, name)

    walk("all", yaml.safe_load((inv / "hosts.yml").read_text())["all"], None)

    def variables(group):
        layers = sorted((inv / "group_vars" / "all").glob("*.yml"))
        chain = []
        while group not in (None, "all"):
            chain.insert(0, group)
            group = groups[group][1]
        layers += [inv / "group_vars" / f"{g}.yml" for g in chain]
        merged = {}
        for layer in layers:
            if layer.is_file():
                merged.update(yaml.safe_load(layer.read_text()) or {})
        return merged

    return groups, variables


def choice_problems(site: str) -> list[str]:
    """Where the inventory's own choices do not fit the facts."""
    facts = site_facts.load(site)
    where = f"ansible/inventories/{site}"
    groups, variables = _inventory(site)
    problems = []
    for name, nodes in facts.nodes.items():
        if nodes.bmc is None:
            continue
        group = name.replace("-", "_")  # Ansible group names cannot have '-'
        if group not in groups:
            problems.append(f"{where}: no group {group} (hosts of nodes/{name}: {nodes.hosts})")
        shape_nps = BIOS_DEFAULTS["bios_shape_nps"].get(nodes.bmc.get("shape"))
        if shape_nps is not None and nodes.nps not in shape_nps:
            problems.append(f"sites/{site}.yaml: nodes/{name}: NPS{nodes.nps} is not one the "
                            f"{nodes.bmc['shape']} shape offers ({shape_nps})")
    site_vars = variables("deploy")
    root = str(site_vars.get("iostack_root", ""))
    if facts.scheduler == "slurm":
        # every node a job runs on loads the stack from there
        for name, nodes in facts.nodes.items():
            if nodes.slurm and not (facts.file_system_of(root, name) or {}).get("shared"):
                problems.append(f"{where}: iostack_root {root} is on no shared file system "
                                f"the facts' nodes/{name} mount")
        # SQLite needs POSIX locks, which Lustre and NFS do not reliably give
        db = str(site_vars.get("reframe_nightly_results_db") or f"{root}/reframe/results.db")
        if (facts.file_system_of(db) or {}).get("shared"):
            problems.append(f"{where}: the results DB {db} is on a shared file system: set "
                            "reframe_nightly_results_db to a local one")
    for entry in site_vars.get("lustre_striping_dirs", []):
        if (facts.file_system_of(entry["path"]) or {}).get("type") != "lustre":
            problems.append(f"{where}: lustre_striping_dirs {entry['path']} is on no Lustre "
                            "file system of the facts")
    # a Cray system has several gcc modules: an unversioned %gcc external matches them all
    packages = yaml.safe_load((paths.SPACK_ENV_SITES / site / "packages.yaml").read_text())
    problems += [f"spack-env/sites/{site}/packages.yaml: external {e['spec']!r} names a "
                 "compiler without its version"
                 for entry in packages["packages"].values() for e in (entry or {}).get("externals", [])
                 for t in e["spec"].split() if t.startswith("%") and "@" not in t]
    return problems


@pytest.mark.parametrize("site", site_facts.names())
def test_the_sites_own_choices_fit_its_facts(site):
    assert choice_problems(site) == []


def test_choices_that_do_not_fit_are_named(monkeypatch, tmp_path):
    shutil.copytree(paths.ANSIBLE_INVENTORIES, tmp_path, symlinks=True, dirs_exist_ok=True)
    site = tmp_path / "cray-ex" / "group_vars" / "all" / "10-site.yml"
    site.write_text(site.read_text().replace("iostack_root: /work/", "iostack_root: /home/")
                    .replace("path: /work/x01/x01/openifs/output\n",
                             "path: /home/x01/openifs/output\n"))
    oci = tmp_path / "oci-bm-optimized3" / "group_vars" / "all" / "10-site.yml"
    oci.write_text("".join(line for line in oci.read_text().splitlines(keepends=True)
                           if not line.startswith("reframe_nightly_results_db:")))
    monkeypatch.setattr(paths, "ANSIBLE_INVENTORIES", pathlib.Path(tmp_path))
    monkeypatch.setitem(BIOS_DEFAULTS["bios_shape_nps"], "BM.Optimized3.36", [1])
    assert choice_problems("cray-ex") == [
        "ansible/inventories/cray-ex: iostack_root /home/x01/shared/iostack is on no shared "
        "file system the facts' nodes/compute mount",
        "ansible/inventories/cray-ex: lustre_striping_dirs /home/x01/openifs/output is on no "
        "Lustre file system of the facts"]
    assert choice_problems("oci-bm-optimized3") == [
        "sites/oci-bm-optimized3.yaml: nodes/compute-nps2: NPS2 is not one the "
        "BM.Optimized3.36 shape offers ([1])",
        "ansible/inventories/oci-bm-optimized3: the results DB "
        "/mnt/nfs/iostack/reframe/results.db is on a shared file system: set "
        "reframe_nightly_results_db to a local one"]
