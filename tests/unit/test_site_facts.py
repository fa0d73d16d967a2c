"""Each site is described once, in sites/<site>.yaml. The facts validate; the Spack site and
the Ansible inventory of each site agree with them (the ReFrame systems read them:
tests/unit/test_reframe_config.py); and a new facts file without its other parts fails here,
each message naming a part that is missing."""
import pathlib
import re
import shutil

import pytest
import yaml
from ansible.plugins.inventory import detect_range, expand_hostname_range

from iostack import cli
from iostack.core import paths
from iostack.site import facts as site_facts


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
    for system in facts.systems:
        if system not in site_facts.reframe_systems():
            missing.append(f"{site}: no ReFrame system {system!r} in reframe-tests/config/"
                           f"iostack.py (build it from site_facts.load({site!r}))")
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
    assert set(site_facts.reframe_systems()) - systems == set()
    assert [site_facts.site_of_system(s) for s in ("local", "local-slurm", "local-cluster",
                                                   "cray-ex")] == ["local", "local", "local", "cray-ex"]
    with pytest.raises(site_facts.FactsError, match="no sites/<site>.yaml lists ReFrame system 'nowhere'"):
        site_facts.site_of_system("nowhere")


def test_a_new_facts_file_alone_fails_naming_every_missing_part(monkeypatch, tmp_path):
    """What a newcomer sees after writing sites/newsite.yaml and nothing else."""
    shutil.copytree(site_facts.FACTS, tmp_path, dirs_exist_ok=True)
    facts = yaml.safe_load((site_facts.FACTS / "oci-bm-optimized3.yaml").read_text())
    facts["name"] = "newsite"
    (tmp_path / "newsite.yaml").write_text(yaml.safe_dump(facts))
    monkeypatch.setattr(site_facts, "FACTS", tmp_path)

    missing = what_is_missing("newsite")
    named = "\n".join(missing)
    for part in [*SPACK_PARTS, *INVENTORY_PARTS, "ReFrame system 'newsite'"]:
        assert part in named, f"{part} not named in:\n{named}"
    assert len(missing) == len(SPACK_PARTS) + len(INVENTORY_PARTS) + 1


# ---- the facts files themselves ----------------------------------------------------------

def test_the_three_sites_and_their_systems():
    assert site_facts.names() == ["cray-ex", "local", "oci-bm-optimized3"]
    assert site_facts.load("local").systems == ("local", "local-slurm", "local-cluster")
    assert site_facts.load("cray-ex").systems == ("cray-ex",)


def test_cray_ex_is_archer2_class_zen2():
    cray = site_facts.load("cray-ex")
    compute = cray.nodes["compute"]
    assert (cray.os, cray.libc, cray.target) == ("sles15", "glibc@2.31", "zen2")
    assert compute.cpu["model"] == "AMD EPYC 7742"
    assert compute.reframe_processor() == {
        "arch": "zen2", "vendor": "AMD", "model": "AMD EPYC 7742", "num_cpus": 128,
        "num_cpus_per_core": 1, "num_cpus_per_socket": 64, "num_sockets": 2}
    assert compute.summary() == "2 x 64-core AMD EPYC 7742, SMT off, NPS4"
    assert cray.io_features("compute") == ["lustre"]
    assert compute.bmc_address_of("nid001000") == "nid001000-bmc"


def test_oci_has_one_group_per_nps_mode_on_node_local_nvme():
    oci = site_facts.load("oci-bm-optimized3")
    nps = {g.nps: g for g in oci.nodes.values() if g.nps is not None}
    assert sorted(nps) == [1, 2]
    for mode, group in nps.items():
        assert group.slurm_access() == [f"--partition=compute-nps{mode}"]
        assert group.reframe_processor()["num_cpus"] == 36
        assert oci.file_system_of(group.scratch) == {"mount": "/mnt/localdisk", "type": "nvme",
                                                     "shared": False}
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
    ({"nodes.compute.scratch": "/scratch/x"}, "/scratch/x is on none of file_systems"),
    ({"nodes.compute.bmc": {"method": "redfish"}}, "'address' is a required property"),
    ({"nodes.compute.slurm": None}, "compute nodes of a Slurm site need slurm: partition"),
    ({"name": "other"}, "name 'other' differs from the file's name 'cray-ex'"),
    ({"nodes.compute.hostnames": ["nid(\\d+"]}, "is not a regular expression"),
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


# ---- the Spack site against the facts ----------------------------------------------------

def _tokens(spec: str) -> set[str]:
    return set(spec.split())


def spack_disagreements(site: str) -> list[str]:
    """Where spack-env/sites/<site>/packages.yaml says otherwise than the facts."""
    facts = site_facts.load(site)
    where = f"spack-env/sites/{site}/packages.yaml"
    packages = yaml.safe_load((paths.SPACK_ENV_SITES / site / "packages.yaml").read_text())["packages"]
    required = set().union(*(_tokens(r) for r in packages.get("all", {}).get("require", [])
                             if isinstance(r, str)))
    problems = []
    wanted = [f"target={facts.target}"]
    externals = [(name, e["spec"]) for name, entry in packages.items()
                 for e in (entry or {}).get("externals", [])]
    if facts.scheduler == "slurm":
        # a cluster's lock is written elsewhere (CI): every node must name the cluster's OS
        # (externals get the host's otherwise), and the libc the cluster's compilers target is
        # declared (lib/iostack/spack_offsite.py)
        wanted.append(f"os={facts.os}")
        libcs = [spec for name, spec in externals if name in ("glibc", "musl")]
        if [spec.split()[0] for spec in libcs] != [facts.libc]:
            problems.append(f"{where}: the libc externals are {libcs}; declare the facts' "
                            f"{facts.libc} (os={facts.os}), non-buildable, as the only one")
        node = {f"os={facts.os}", f"target={facts.target}"}
        problems += [f"{where}: external {spec!r} does not say {' '.join(sorted(node))}"
                     for _, spec in externals if not node <= _tokens(spec)]
    problems += [f"{where}: all: require lacks {w} (sites/{site}.yaml)"
                 for w in wanted if w not in required]
    # a Cray system has several gcc modules: an unversioned %gcc matches them all
    problems += [f"{where}: external {spec!r} names a compiler without its version"
                 for _, spec in externals
                 for t in _tokens(spec) if t.startswith("%") and "@" not in t]
    return problems


@pytest.mark.parametrize("site", site_facts.names())
def test_spack_site_agrees_with_the_facts(site):
    assert spack_disagreements(site) == []


def test_a_new_sites_packages_yaml_is_checked_against_its_facts(monkeypatch, tmp_path):
    facts = yaml.safe_load((site_facts.FACTS / "oci-bm-optimized3.yaml").read_text())
    (tmp_path / "newsite.yaml").write_text(yaml.safe_dump({**facts, "name": "newsite"}))
    monkeypatch.setattr(site_facts, "FACTS", tmp_path)
    (tmp_path / "newsite").mkdir()
    (tmp_path / "newsite" / "packages.yaml").write_text(
        "packages:\n  all:\n    require: [target=icelake]\n")
    monkeypatch.setattr(paths, "SPACK_ENV_SITES", tmp_path)
    assert spack_disagreements("newsite") == [
        "spack-env/sites/newsite/packages.yaml: the libc externals are []; declare the facts' "
        "glibc@2.28 (os=ol8), non-buildable, as the only one",
        "spack-env/sites/newsite/packages.yaml: all: require lacks os=ol8 "
        "(sites/newsite.yaml)"]


def test_a_spack_site_that_says_another_os_or_libc_is_named(monkeypatch, tmp_path):
    shutil.copytree(paths.SPACK_ENV_SITES / "cray-ex", tmp_path / "cray-ex")
    f = tmp_path / "cray-ex" / "packages.yaml"
    f.write_text(f.read_text().replace("glibc@2.31 os=sles15", "glibc@2.36 os=sles15")
                 .replace("os=sles15 target=zen2 %gcc@11.2.0", "os=debian12 target=zen2 %gcc"))
    monkeypatch.setattr(paths, "SPACK_ENV_SITES", tmp_path)
    problems = "\n".join(spack_disagreements("cray-ex"))
    assert "glibc@2.36" in problems and "declare the facts' glibc@2.31" in problems
    assert "does not say os=sles15 target=zen2" in problems and "without its version" in problems


# ---- the Ansible inventory against the facts ---------------------------------------------

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


def inventory_disagreements(site: str) -> list[str]:
    """Where ansible/inventories/<site> says otherwise than the facts."""
    facts = site_facts.load(site)
    where = f"ansible/inventories/{site}"
    groups, variables = _inventory(site)
    problems = []
    for host in {h for hosts, _ in groups.values() for h in hosts}:
        if not any(re.fullmatch(p, host) for p in facts.hostnames):
            problems.append(f"{where}: host {host} matches none of the facts' hostnames "
                            f"{facts.hostnames}")
    for name, nodes in facts.nodes.items():
        if nodes.bmc is None:
            continue
        group = name.replace("-", "_")  # Ansible group names cannot have '-'
        if group not in groups:
            problems.append(f"{where}: no group {group} (hosts of nodes/{name}: {nodes.hosts})")
            continue
        hosts = _hosts(nodes.hosts)
        if sorted(groups[group][0]) != sorted(hosts):
            problems.append(f"{where}: group {group} has {groups[group][0]}, facts {hosts}")
        got = variables(group)
        want = {"bios_method": nodes.bmc["method"], "bios_smt": nodes.smt, "bios_nps": nodes.nps,
                "bios_shape": nodes.bmc.get("shape")}
        if nodes.bmc["method"] == "redfish":
            # the role picks BIOS attribute names by CPU vendor
            want["bios_cpu_vendor"] = (nodes.cpu or {}).get("vendor")
            want["bios_bmc_address"] = nodes.bmc["address"].replace(
                "{host}", "{{ inventory_hostname }}")
        shape_nps = BIOS_DEFAULTS["bios_shape_nps"].get(nodes.bmc.get("shape"))
        if shape_nps is not None and nodes.nps not in shape_nps:
            problems.append(f"sites/{site}.yaml: nodes/{name}: NPS{nodes.nps} is not one the "
                            f"{nodes.bmc['shape']} shape offers ({shape_nps})")
        fs = facts.file_system_of(nodes.scratch) if nodes.scratch else None
        if fs and fs["type"] == "nvme":
            want["nvme_scratch_mount"] = fs["mount"]
        for var, value in want.items():
            if value is not None and got.get(var) != value:
                problems.append(f"{where}: {group}: {var} is {got.get(var)!r}, the facts say "
                                f"{value!r} (nodes/{name})")
    site_vars = variables("deploy")
    if site_vars.get("iostack_site") != site:
        problems.append(f"{where}: iostack_site is {site_vars.get('iostack_site')!r}")
    root = str(site_vars.get("iostack_root", ""))
    if facts.scheduler == "slurm" and not (facts.file_system_of(root) or {}).get("shared"):
        problems.append(f"{where}: iostack_root {root} is on no shared file system of the facts")
    for entry in site_vars.get("lustre_striping_dirs", []):
        if (facts.file_system_of(entry["path"]) or {}).get("type") != "lustre":
            problems.append(f"{where}: lustre_striping_dirs {entry['path']} is on no Lustre "
                            "file system of the facts")
    return problems


@pytest.mark.parametrize("site", site_facts.names())
def test_inventory_agrees_with_the_facts(site):
    assert inventory_disagreements(site) == []


def test_an_inventory_that_differs_from_the_facts_is_named(monkeypatch, tmp_path):
    shutil.copytree(paths.ANSIBLE_INVENTORIES, tmp_path, symlinks=True, dirs_exist_ok=True)
    f = tmp_path / "cray-ex" / "group_vars" / "compute.yml"
    f.write_text(f.read_text().replace("bios_nps: 4", "bios_nps: 1"))
    hosts = tmp_path / "oci-bm-optimized3" / "hosts.yml"
    hosts.write_text(hosts.read_text().replace("hpc-node-[3:4]", "hpc-node-[3:5]"))
    monkeypatch.setattr(paths, "ANSIBLE_INVENTORIES", pathlib.Path(tmp_path))
    monkeypatch.setitem(BIOS_DEFAULTS["bios_shape_nps"], "BM.Optimized3.36", [1])
    assert inventory_disagreements("cray-ex") == [
        "ansible/inventories/cray-ex: compute: bios_nps is 1, the facts say 4 (nodes/compute)"]
    assert inventory_disagreements("oci-bm-optimized3") == [
        "ansible/inventories/oci-bm-optimized3: group compute_nps2 has "
        "['hpc-node-3', 'hpc-node-4', 'hpc-node-5'], facts ['hpc-node-3', 'hpc-node-4']",
        "sites/oci-bm-optimized3.yaml: nodes/compute-nps2: NPS2 is not one the "
        "BM.Optimized3.36 shape offers ([1])"]
