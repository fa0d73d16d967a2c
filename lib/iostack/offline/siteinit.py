"""`bin/iostack site init NAME`: describe the node it runs on as a new site, from what Spack,
ReFrame and Slurm detect, in the form every tree reads.

Detection (`detect`), each by the tool that knows:
- Spack, in a scratch environment of its own (the project's Spack runner, so the repository's
  configuration isolation applies): `spack compiler find`, then `spack external find
  --not-buildable` of the packages the stack takes from the system (STACK_EXTERNALS), then
  `spack node-facts` (spack-ext/spack-iostack) reads back what they wrote, with the node's
  OS, target and libc as Spack names them. ecCodes, netCDF-C and PnetCDF have no detection in Spack's recipes:
  the repository `iostack_detect` (packages/spack_repo/) subclasses them with one, used here
  only, so no site's lock depends on it.
- dpkg: the Debian package that owns each external's files (`debian:` in packages.yaml,
  which set-up installs); an external no package owns (a pyenv shim, a hand install) is left
  out, since set-up could not give it to another node.
- ReFrame: the processor (`reframe --detect-host-topology`): sockets, cores, SMT, NUMA.
- Slurm, when one answers (`sinfo`): partitions and their nodes (`scontrol show partition`,
  `scontrol show node`), each partition a node group; `findmnt` names the file system the
  repository (and so the deployment) is on.

What each tool printed is kept in `Findings.records` (`--record DIR` writes them), and the
site's files are made from those records alone (`Findings.from_records`, `site_files`), so
the tests run the same code on what the tools printed on a real node.

Writing: nothing is written when the name is taken in any tree; the files are made in a
staging directory, the facts validated there, then moved into place, all or none.
"""
from __future__ import annotations

import logging
import dataclasses
import datetime
import json
import os
import pathlib
import re
import shutil
import socket
import tempfile
from typing import Any

from iostack.core import filesystems, paths
from iostack.core.errors import Failed, IostackError
from iostack.core.settings import Settings
from iostack.core.process import capture, run
from iostack.site import facts as sites
from iostack.site import generate
from iostack.site import packages as syspkgs
from iostack.spack import runner

log = logging.getLogger(__name__)

#: packages the stack takes from the system when they are there (local's externals): the
#: compilers come from `spack compiler find`
STACK_EXTERNALS = ("openmpi", "mpich", "cmake", "gmake", "pkgconf", "perl", "python", "bison",
                   "flex", "m4", "autoconf", "automake", "libtool", "ncurses", "rsync", "zlib",
                   "eccodes", "netcdf-c", "netcdf-fortran", "parallel-netcdf", "openblas", "fio")
DETECT_REPO = paths.REPO / "packages" / "spack_repo" / "iostack_detect"
#: findmnt's file-system types, as the facts name them
FS_TYPES = {"nfs": "nfs", "nfs4": "nfs", "lustre": "lustre"}
#: the records of a detection, by file name
RECORDS = ("node.json", "spack-detect.json", "dpkg-S.txt", "topology.json",
           "slurm-partitions.txt", "slurm-nodes.txt")


class SiteInitError(IostackError):
    """Site init refuses (a name taken, facts that do not validate): nothing is written."""


# ---- the name ------------------------------------------------------------------------------

def taken(name: str) -> list[str]:
    """Where the name is already used (empty: free)."""
    if not re.fullmatch(r"[a-z][a-z0-9-]*", name):
        raise SiteInitError(f"site name {name!r} is not lower-case letters, digits and '-' "
                            "starting with a letter (sites/schema.yaml)")
    found = [str(p.relative_to(paths.REPO)) for p in
             (sites.FACTS / f"{name}.yaml", paths.SPACK_ENV_SITES / name,
              paths.ANSIBLE_INVENTORIES / name) if p.exists() or p.is_symlink()]
    found += [f"ReFrame system {name!r} of site {site}" for site in sites.names()
              if site != name and name in sites.load(site).systems]
    return found


# ---- the records: what the tools printed -----------------------------------------------

@dataclasses.dataclass(frozen=True)
class SlurmNodes:
    """A Slurm partition and what `scontrol show node` says of its first node."""
    partition: str
    nodes: str
    sockets: int | None
    cores_per_socket: int | None
    threads_per_core: int | None


@dataclasses.dataclass
class Findings:
    name: str
    #: what each tool printed, by RECORDS name
    records: dict[str, str]

    @classmethod
    def from_records(cls, name: str, directory: pathlib.Path) -> "Findings":
        return cls(name, {f: (directory / f).read_text() for f in RECORDS
                          if (directory / f).is_file()})

    def write_records(self, directory: pathlib.Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for f, text in self.records.items():
            (directory / f).write_text(text)

    @property
    def node(self) -> dict:
        return json.loads(self.records["node.json"])

    @property
    def spack(self) -> dict:
        return json.loads(self.records["spack-detect.json"])

    @property
    def topology(self) -> dict:
        return json.loads(self.records["topology.json"])

    @property
    def owners(self) -> dict[str, list[str]]:
        return dpkg_owners(self.records.get("dpkg-S.txt", ""))

    @property
    def slurm(self) -> list[SlurmNodes]:
        """The partitions of the Slurm that answered, [] if none did."""
        if "slurm-partitions.txt" not in self.records:
            return []
        nodes = [scontrol_fields(line) for line in self.records["slurm-nodes.txt"].splitlines()
                 if line.strip()]
        out = []
        for line in self.records["slurm-partitions.txt"].splitlines():
            if not line.strip():
                continue
            part = scontrol_fields(line)
            node = next((n for n in nodes if part["PartitionName"] in
                         n.get("Partitions", "").split(",")), {})
            sockets, cores, threads = (int(node[key]) if node.get(key, "").isdigit() else None
                                       for key in ("Sockets", "CoresPerSocket", "ThreadsPerCore"))
            out.append(SlurmNodes(part["PartitionName"], part.get("Nodes", ""),
                                  sockets, cores, threads))
        return out


def dpkg_owners(output: str) -> dict[str, list[str]]:
    """{path: packages} of `dpkg -S PATH...` (dpkg-query(1): `pkg[:arch][, pkg...]: path`;
    diversion lines say who diverted a file, not who owns it)."""
    owners = {}
    for line in output.splitlines():
        if line.startswith("diversion by ") or ": " not in line:
            continue
        packages, path = line.split(": ", 1)
        owners[path.strip()] = [p.strip().split(":")[0] for p in packages.split(",")]
    return owners


def scontrol_fields(line: str) -> dict[str, str]:
    """KEY=VALUE fields of one `scontrol show ... --oneliner` line (a value with spaces, as
    OS=, keeps its first word)."""
    return dict(re.findall(r"(?:^|\s)([A-Za-z]+)=(\S*)", line))


# ---- detection -------------------------------------------------------------------------

def _spack_scratch_env(directory: pathlib.Path) -> pathlib.Path:
    """A Spack environment that has only the repositories: detection writes into it."""
    (directory / "spack.yaml").write_text(
        "spack:\n  repos:\n"
        f"    iostack_detect: {DETECT_REPO}\n"
        "    iostack: $IOSTACK_REPO/packages/spack_repo/iostack\n"
        "    builtin: $IOSTACK_SPACK_PACKAGES/repos/spack_repo/builtin\n"
        "  config:\n    extensions:\n    - $IOSTACK_REPO/spack-ext/spack-iostack\n"
        "  specs: []\n  view: false\n")
    return directory


def _captured(cmd, what: str, env_extra=None) -> str:
    proc = run(cmd, env_extra=env_extra, capture=True, capture_stderr=True, check=False)
    if proc.returncode != 0:
        raise Failed(f"{what} failed (exit {proc.returncode}): "
                     f"{runner.error_line(proc.stderr or '')}")
    return proc.stdout


def _spack(settings: Settings, args, what: str) -> str:
    # Spack's caches (its repository index) stay between runs, as for set-up's key trust
    env = runner.environment(settings, settings.scratch_spack_root)
    return _captured([runner.spack_bin(settings), *args], what, env)


def detect_spack(settings: Settings, scratch: pathlib.Path) -> str:
    env = ["-e", _spack_scratch_env(scratch)]
    _spack(settings, [*env, "compiler", "find"], "spack compiler find")
    _spack(settings, [*env, "external", "find", "--not-buildable", *STACK_EXTERNALS],
           "spack external find")
    return _spack(settings, [*env, "node-facts"], "spack node-facts (what Spack detected)")


def detect_dpkg(detected: dict) -> str:
    """`dpkg -S` of every external's files and of what their links point at."""
    if not shutil.which("dpkg"):
        return ""
    files = {f for entries in detected["externals"].values() for e in entries
             for f in [*e["files"], *e["links"].values()]}
    if not files:
        return ""
    # exit 1 when some path is no package's: those are what it leaves out
    return capture(["dpkg", "-S", *sorted(files)]).stdout


def detect_topology(settings: Settings, scratch: pathlib.Path) -> str:
    reframe = settings.venv / "bin" / "reframe"
    if not reframe.exists():
        raise SiteInitError("ReFrame not found in the venv: run bin/iostack setup")
    out = scratch / "topology.json"
    proc = run([reframe, f"--detect-host-topology={out}"], cwd=scratch, capture=True,
               capture_stderr=True, check=False)
    if proc.returncode != 0 or not out.is_file():
        raise Failed(f"reframe --detect-host-topology failed (exit {proc.returncode}): "
                     f"{((proc.stderr or '').strip().splitlines() or ['no message'])[-1]}")
    return out.read_text()


def detect_slurm() -> dict[str, str]:
    """The partitions and nodes of the Slurm that answers here; {} without one."""
    if not (shutil.which("sinfo") and shutil.which("scontrol")):
        return {}
    if capture(["sinfo", "--noheader", "--format=%R"]).returncode != 0:
        log.info("sinfo is here but no Slurm controller answers: a site without Slurm")
        return {}
    return {
        "slurm-partitions.txt": _captured(["scontrol", "show", "partition", "--oneliner"],
                                          "scontrol show partition"),
        "slurm-nodes.txt": _captured(["scontrol", "show", "node", "--oneliner"],
                                     "scontrol show node"),
    }


def detect_node() -> str:
    release = syspkgs.os_release() if syspkgs.OS_RELEASE.is_file() else {}
    mount = filesystems.mount_of(paths.REPO)
    return json.dumps({
        "hostname": socket.gethostname(),
        "os_release": release.get("PRETTY_NAME", ""),
        "repository": str(paths.REPO),
        # findmnt's answer; [] where it has none (a chroot)
        "repository_mount": [mount.mountpoint, mount.fstype] if mount.fstype != "?" else [],
        "date": datetime.date.today().isoformat(),
    }, indent=1) + "\n"


def detect(settings: Settings, name: str) -> Findings:
    """Run every detection on this node."""
    with tempfile.TemporaryDirectory(prefix=f"iostack-site-init-{name}-") as tmp:
        scratch = pathlib.Path(tmp)
        records = {"node.json": detect_node()}
        records["spack-detect.json"] = detect_spack(settings, scratch)
        records["dpkg-S.txt"] = detect_dpkg(json.loads(records["spack-detect.json"]))
        records["topology.json"] = detect_topology(settings, scratch)
        records.update(detect_slurm())
    return Findings(name, records)


# ---- what the site is, from the records -----------------------------------------------------

@dataclasses.dataclass
class External:
    package: str
    entry: dict
    #: the Debian package that owns its files, None where there is no dpkg
    debian: str | None


def externals(findings: Findings) -> tuple[list[External], list[str]]:
    """The externals a site takes, and one line for each it leaves out (no Debian package
    owns its files, on a node with dpkg)."""
    owners = findings.owners
    with_dpkg = bool(findings.records.get("dpkg-S.txt"))
    taken, left = [], []
    for package, entries in sorted(findings.spack["externals"].items()):
        for entry in entries:
            votes: dict[str, int] = {}
            for f in entry["files"]:
                for pkg in owner_of(f, entry["links"].get(f, f), owners):
                    votes[pkg] = votes.get(pkg, 0) + 1
            # the package owning most of its files; the first file's on a tie
            debian = max(votes, key=lambda pkg: votes[pkg]) if votes else None
            # spec first, as a person writes it
            spec = {k: entry[k] for k in ("spec", "prefix", "modules", "extra_attributes")
                    if k in entry}
            if with_dpkg and debian is None:
                left.append(f"{entry['spec']} at {entry['prefix']}: no Debian package owns "
                            f"{', '.join(entry['files']) or 'its prefix'}")
                continue
            taken.append(External(package, spec, debian))
    return taken, left


def owner_of(path: str, real: str, owners: dict[str, list[str]]) -> list[str]:
    """The packages that own a file an external was found by (`real`: where its links end).
    A program: the file its links end at, whose package is the versioned one (gcc-14,
    python3.13, not gcc, python3). A library's link name (libX.so): the link itself, whose
    package has the headers (-dev)."""
    first, then = (path, real) if path.endswith(".so") else (real, path)
    return owners.get(first) or owners.get(then) or []


def system_compiler(found: list[External]) -> External:
    """The gcc that `gcc` on PATH is (the unsuffixed one), else the newest."""
    gccs = [e for e in found if e.package == "gcc"]
    if not gccs:
        raise SiteInitError("spack compiler find found no gcc: install the system compiler "
                            "(Debian: gcc g++ gfortran; bin/iostack setup does)")
    plain = [e for e in gccs if os.path.basename(
        e.entry["extra_attributes"]["compilers"].get("c", "")) == "gcc"]
    return (plain or gccs)[0]


def _version(spec: str) -> str:
    return spec.split()[0].split("@", 1)[1]


def node_groups(findings: Findings) -> dict[str, dict]:
    """The facts' node groups: this node (no Slurm), or one per Slurm partition and this node
    as the login node."""
    topo = findings.topology
    target = findings.spack["target"]
    hostname = findings.node["hostname"]
    threads = topo.get("num_cpus_per_core") or 1
    cpu = {"target": target}
    if topo.get("model"):
        cpu["model"] = topo["model"]
    if topo.get("num_sockets") and topo.get("num_cpus_per_socket"):
        cpu.update(sockets=topo["num_sockets"],
                   cores_per_socket=topo["num_cpus_per_socket"] // threads)
    here = {"cpu": cpu, "smt": threads > 1}
    numa = len((topo.get("topology") or {}).get("numa_nodes") or [])
    sockets = topo.get("num_sockets") or 0
    if numa and sockets:
        nps = 0 if (numa == 1 and sockets > 1) else numa // sockets
        if nps in (0, 1, 2, 4) and (nps == 0 or numa % sockets == 0):
            here["nps"] = nps
    if not findings.slurm:
        return {"compute": {"hosts": ["localhost"],
                            "hostnames": [re.escape(hostname), "localhost"],
                            **here, "bmc": {"method": "none"}}}
    groups: dict[str, dict] = {}
    for part in findings.slurm:
        group: dict[str, Any] = {"hosts": slurm_hosts_as_ansible(part.nodes),
                 "hostnames": sorted({hostname_pattern(h) for h in
                                      slurm_hosts_as_ansible(part.nodes)})}
        group["cpu"] = {"target": target}
        if part.sockets and part.cores_per_socket:
            group["cpu"].update(sockets=part.sockets, cores_per_socket=part.cores_per_socket)
        if part.threads_per_core:
            group["smt"] = part.threads_per_core > 1
        group["slurm"] = {"partition": part.partition}
        group["bmc"] = {"method": "none"}
        groups[part.partition] = group
    groups["login"] = {"hosts": [hostname], "hostnames": [re.escape(hostname)]}
    return groups


def slurm_hosts_as_ansible(nodes: str) -> list[str]:
    """A Slurm host list (`node[01-03,07],login1`) as Ansible host patterns
    (`node[01:03]`, `node07`, `login1`)."""
    out = []
    for item in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", nodes):
        m = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", item)
        if not m:
            out.append(item)
            continue
        head, ranges, tail = m.groups()
        for part in ranges.split(","):
            first, _, last = part.partition("-")
            out.append(f"{head}[{first}:{last}]{tail}" if last else f"{head}{first}{tail}")
    return out


def hostname_pattern(host: str) -> str:
    """A regular expression of an Ansible host pattern's names (`node[01:03]` -> node\\d+)."""
    return re.sub(r"\\\[\d+:\d+\\\]", r"\\d+", re.escape(host))


def file_systems(findings: Findings) -> list[dict]:
    """On a Slurm site: the file system the repository is on (where deploy/<site> goes),
    shared when it is NFS or Lustre."""
    mount = findings.node.get("repository_mount") or []
    if not findings.slurm or len(mount) != 2:
        return []
    kind = FS_TYPES.get(mount[1], "local")
    return [{"mount": mount[0], "type": kind, **({} if kind != "local" else {"shared": False})}]


# ---- the files -------------------------------------------------------------------------

def _yaml(data) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=100)


def facts(findings: Findings, description: str | None = None) -> dict:
    node = findings.node
    detected = findings.spack
    what = node["os_release"] or detected["os"]
    data = {
        "name": findings.name,
        "description": description or f"{what} node {node['hostname']} (bin/iostack site init)",
        "os": detected["os"],
        "libc": detected["libc"],
        "scheduler": "slurm" if findings.slurm else "local",
    }
    fs = file_systems(findings)
    if fs:
        data["file_systems"] = fs
    data["nodes"] = node_groups(findings)
    return data


def stack_choices() -> dict[str, dict]:
    """local's packages.yaml entries that say how the stack is built, not what its node has:
    neither externals nor the choice of a virtual's provider (`blas: {require: openblas}`)."""
    import yaml

    local = yaml.safe_load((paths.SPACK_ENV_SITES / "local" / "packages.yaml").read_text())
    return {name: entry for name, entry in local["packages"].items()
            if name != "all" and "externals" not in entry
            and not (set(entry) == {"require"} and isinstance(entry["require"], str)
                     and re.fullmatch(r"[a-z0-9-]+", entry["require"]))}


def packages_yaml(findings: Findings) -> str:
    found, _ = externals(findings)
    detected = findings.spack
    slurm = bool(findings.slurm)
    # a template (packages.yaml.in): the node's OS, target and libc are the facts', which
    # `bin/iostack site generate` puts in; a cluster's lock names them on every node
    node = "os=[[ facts.os ]] target=[[ facts.target ]]"
    require = [node if slurm else "target=[[ facts.target ]]"]
    packages: dict = {"all": {"require": require}}
    if slurm and detected.get("libc"):
        libc_name = detected["libc"].split("@")[0]
        packages[libc_name] = {"externals": [{"spec": f"[[ facts.libc ]] {node}",
                                              "prefix": "/usr"}], "buildable": False}
    compiler = system_compiler(found)
    by_package: dict[str, list[External]] = {}
    for e in found:
        by_package.setdefault(e.package, []).append(e)
    for package, entries in by_package.items():
        listed = []
        for e in entries:
            entry = dict(e.entry)
            if slurm:
                entry["spec"] = f"{entry['spec']} {node}"
            if e.debian:
                entry["extra_attributes"] = {"debian": e.debian,
                                             **(entry.get("extra_attributes") or {})}
                entry = {k: entry[k] for k in ("spec", "prefix", "modules", "extra_attributes")
                         if k in entry}
            listed.append(entry)
        packages[package] = {"externals": listed, "buildable": False}
    # each virtual the externals provide, from the first that provides it (the system
    # compiler for the languages)
    providers: dict[str, str] = {}
    for package in by_package:
        for virtual in detected["provides"].get(package, []):
            providers.setdefault(virtual, package)
    for language in ("c", "cxx", "fortran"):
        providers[language] = compiler.package
    for virtual, package in sorted(providers.items()):
        if virtual in ("c", "cxx", "fortran", "mpi", "pkgconfig", "yacc"):
            packages[virtual] = {"require": package}
    # how local builds its stack (versions and variants it requires, e.g. MultIO 1.5.1), so
    # the new site builds the same stack on its own externals
    for package, entry in stack_choices().items():
        packages.setdefault(package, entry)
    head = (f"# {findings.name}: {findings.node['os_release'] or detected['os']} node "
            f"{findings.node['hostname']}, written by `bin/iostack site init` on "
            f"{findings.node['date']}.\n"
            "# Externals are what `spack compiler find` and `spack external find` found there, "
            "each\n# non-buildable, with the Debian package dpkg says owns it (`debian:`); "
            "Spack builds the\n# rest of the stack from the source mirror. sites/"
            f"{findings.name}.yaml has the node facts this file agrees with.\n")
    return head + _yaml({"packages": packages})


def modules_yaml(findings: Findings) -> str:
    compiler = system_compiler(externals(findings)[0])
    version = _version(compiler.entry["spec"])
    # a template (modules.yaml.in): `bin/iostack site generate` adds what the facts'
    # grib_definitions need (iostack.site.generate.eccodes_modules)
    return (f"# The system compiler (gcc {version}, Spack's compiler find): what it builds "
            "goes in Core.\n" + _yaml({"modules": {"default": {"lmod": {
                "core_compilers": [f"gcc@{version}"]}}}})
            + "[[- eccodes_modules(facts) ]]\n")


def spack_yaml(findings: Findings) -> str:
    local = (paths.SPACK_ENV_SITES / "local" / "spack.yaml").read_text()
    body = local[local.index("spack:"):]
    return (f"# Site `{findings.name}` (bin/iostack site init): the stack of site local (the "
            "NWP support libraries\n# and the I/O benchmarks from the source mirror) on this "
            "node's externals.\n" + body)


def inventory_files(findings: Findings, data: dict) -> dict[str, str]:
    name = findings.name
    slurm = bool(findings.slurm)
    groups = {}
    for group_name, group in data["nodes"].items():
        if "bmc" in group:
            groups[group_name.replace("-", "_")] = {"hosts": {h: None for h in group["hosts"]}}
    deploy_host = "localhost" if not slurm else findings.node["hostname"]
    groups["deploy"] = {"hosts": {deploy_host: None}}
    hosts = ("---\n# Written by `bin/iostack site init`: the hosts of "
             f"sites/{name}.yaml.\n" + _yaml({"all": {"children": groups}}))
    site_vars: dict[str, Any] = {"iostack_site": "[[ facts.name ]]"}
    if not slurm:
        site_vars.update({"ansible_connection": "local",
                          "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                          "iostack_repo_dir": "{{ playbook_dir | dirname }}",
                          "iostack_root": f"{{{{ playbook_dir | dirname }}}}/deploy/{name}"})
    else:
        site_vars.update({"iostack_repo_dir": str(paths.REPO),
                          "iostack_root": str(paths.REPO / "deploy" / name)})
    site_vars.update({"bios_method": "none"})
    site_vars["nvme_scratch_devices"] = []
    files = {
        f"ansible/inventories/{name}/hosts.yml": hosts,
        f"ansible/inventories/{name}/group_vars/all/10-site.yml.in":
            f"---\n# Site {name} (bin/iostack site init).\n" + _yaml(site_vars),
    }
    for group_name, group in data["nodes"].items():
        bios = {k: group[k] for k in ("smt", "nps") if k in group}
        if "bmc" in group and bios:
            files[f"ansible/inventories/{name}/group_vars/{group_name.replace('-', '_')}.yml"] = (
                "---\n# The nodes' firmware settings as detected (bios_method none: not changed)\n"
                + _yaml({f"bios_{k}": v for k, v in bios.items()}))
    return files


#: the symlink every inventory has to the common layer
COMMON_LINK = ("group_vars/all/00-common.yml", "../../../common/group_vars/all.yml")


def site_files(findings: Findings, description: str | None = None) -> dict[str, str]:
    """{path in the repository: content} of the new site: its facts, and the templates
    (`*.in`) `write` generates the Spack site's packages.yaml, modules.yaml and the inventory's site
    variables from, as every site's are."""
    name = findings.name
    data = facts(findings, description)
    return {
        f"sites/{name}.yaml": (f"# {name}: written by `bin/iostack site init` on "
                               f"{findings.node['hostname']} ({findings.node['date']}) from what "
                               "Spack, ReFrame\n# and Slurm detected there. The Spack site, the "
                               "ReFrame system and the Ansible inventory\n# of the site read or "
                               "agree with these facts.\n" + _yaml(data)),
        f"spack-env/sites/{name}/spack.yaml": spack_yaml(findings),
        f"spack-env/sites/{name}/packages.yaml.in": packages_yaml(findings),
        f"spack-env/sites/{name}/modules.yaml.in": modules_yaml(findings),
        **inventory_files(findings, data),
    }


def summary(findings: Findings) -> str:
    """What was found, for the admin to read before anything else."""
    detected = findings.spack
    node = findings.node
    found, left = externals(findings)
    topo = findings.topology
    lines = [f"site {findings.name}: {node['os_release'] or detected['os']} on "
             f"{node['hostname']}",
             f"  Spack:    {detected['platform']}-{detected['os']}-{detected['target']}, "
             f"{detected['libc']}",
             f"  ReFrame:  {topo.get('model') or 'CPU'}: {topo.get('num_sockets')} socket(s), "
             f"{topo.get('num_cpus')} CPUs, {topo.get('num_cpus_per_core')} per core, "
             f"{len((topo.get('topology') or {}).get('numa_nodes') or [])} NUMA node(s)"]
    compiler = system_compiler(found)
    lines.append(f"  compiler: {compiler.entry['spec'].split()[0]} (Core), "
                 f"{len([e for e in found if e.package == 'gcc'])} gcc found")
    lines.append("  externals:")
    for e in found:
        lines.append(f"    {e.entry['spec'].split()[0]:28s} {e.entry['prefix']:40s} "
                     f"{e.debian or '(no dpkg)'}")
    for line in left:
        lines.append(f"  left out: {line}")
    missing = sorted(set(STACK_EXTERNALS) - {e.package for e in found} - {"mpich", "openmpi"})
    if missing:
        lines.append(f"  not found (Spack builds them, from the source mirror): "
                     f"{', '.join(missing)}")
    if findings.slurm:
        for part in findings.slurm:
            lines.append(f"  Slurm:    partition {part.partition}: {part.nodes} "
                         f"({part.sockets} x {part.cores_per_socket} cores, "
                         f"{part.threads_per_core} thread(s) per core)")
        for fs in file_systems(findings):
            if fs["type"] == "local":
                lines.append(f"  warning:  the repository is on {fs['mount']}, a local file "
                             "system: the compute nodes cannot see deploy/; set iostack_root "
                             "in the inventory to a shared one")
        lines.append("  cpu target of the partitions: this node's "
                     f"({detected['target']}); check it is the compute nodes' too")
    else:
        lines.append("  Slurm:    none answers here: the local scheduler")
    return "\n".join(lines)


# ---- writing ---------------------------------------------------------------------------

def write(findings: Findings, files: dict[str, str]) -> list[str]:
    """Write the site's files, all or none; the trees' entries that were made."""
    name = findings.name
    if taken(name):
        raise SiteInitError(f"site {name} exists ({', '.join(taken(name))}): nothing written")
    stage = pathlib.Path(tempfile.mkdtemp(prefix=f".site-init-{name}-", dir=paths.REPO))
    try:
        for rel, text in files.items():
            (stage / rel).parent.mkdir(parents=True, exist_ok=True)
            (stage / rel).write_text(text)
        inventory = stage / "ansible" / "inventories" / name
        (inventory / COMMON_LINK[0]).parent.mkdir(parents=True, exist_ok=True)
        (inventory / COMMON_LINK[0]).symlink_to(COMMON_LINK[1])
        try:
            sites.read(stage / "sites" / f"{name}.yaml")
        except sites.FactsError as e:
            raise SiteInitError(f"the facts made from this node do not validate: {e}") from None
        entries = [f"sites/{name}.yaml", f"spack-env/sites/{name}", f"ansible/inventories/{name}"]
        moved = []
        try:
            for rel in entries:
                target = paths.REPO / rel
                if target.exists() or target.is_symlink():
                    raise SiteInitError(f"{rel} appeared while site init ran: nothing written")
                target.parent.mkdir(parents=True, exist_ok=True)
                os.rename(stage / rel, target)
                moved.append(target)
        except BaseException:
            for target in reversed(moved):
                if target.is_dir():
                    shutil.rmtree(target)
                else:
                    target.unlink()
            raise
        sites.load.cache_clear()
        # ReFrame's configuration of its systems and the templates' files, generated from
        # the facts now in place
        entries += [g.shown for g in generate.write(name)]
        return entries
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        sites.load.cache_clear()


def main(settings: Settings, name: str, dry_run: bool = False, record: pathlib.Path | None = None,
         records: pathlib.Path | None = None, description: str | None = None) -> int:
    """Detect (or read `records`), show what was found, write the site."""
    where = taken(name)
    if where:
        raise SiteInitError(f"site {name} exists ({', '.join(where)}): nothing written")
    if records:
        findings = Findings.from_records(name, records)
        missing = [f for f in RECORDS[:4] if f not in findings.records]
        if missing:
            raise SiteInitError(f"{records} lacks {', '.join(missing)}: nothing written")
    else:
        runner.locate(settings)     # SpackMissing says how to provide it
        findings = detect(settings, name)
    if record:
        findings.write_records(record)
        log.info(f"what the tools printed is in {record}")
    files = site_files(findings, description)
    log.info(summary(findings), extra={"bare": True})
    if dry_run:
        log.info(f"--dry-run: would write {', '.join(sorted(files))}")
        return 0
    entries = write(findings, files)
    log.info(f"site {name} written: {', '.join(entries)}\n"
          f"iostack: next: bin/iostack lock --update {name}, then "
          f"bin/iostack deploy --site {name}")
    return 0
