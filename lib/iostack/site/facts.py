"""Sites: each described once, in its facts file sites/<site>.yaml, and found under that name
in every tree (spack-env/sites/, ansible/inventories/, the ReFrame configuration).

The facts (OS and libc, scheduler, programming environment, node groups with their CPU, NPS,
SMT, scratch, Slurm partition and placement rules, RDMA NIC and BMC, file systems, the site's
own ecCodes definitions) are validated against sites/schema.yaml and a few rules a
schema cannot say. The ReFrame configuration builds its systems from them; the Spack site and
the Ansible inventory are checked against them (tests/unit/test_site_facts.py).
Only the standard library is imported at module level: `bin/iostack setup` runs before the
venv with PyYAML and jsonschema exists.
"""
from __future__ import annotations

import dataclasses
import functools
import pathlib
import re
from typing import Any

from iostack.core import paths
from iostack.core.errors import IostackError
from iostack.site.target import SpackEnv

FACTS = paths.REPO / "sites"
SCHEMA = FACTS / "schema.yaml"
#: archspec's vendor names of the CPU vendors facts may name
ARCHSPEC_VENDORS = {"AMD": "AuthenticAMD", "Intel": "GenuineIntel"}
#: a Spack package's name (a grib_definitions entry that is no directory)
SPACK_PACKAGE = re.compile(r"[a-z0-9][a-z0-9-]*")
#: where a package of ecCodes definitions installs them, under its prefix
PACKAGE_DEFINITIONS = "share/eccodes/definitions"


class FactsError(IostackError, ValueError):
    """A facts file that is missing, malformed or inconsistent: one line naming the file."""


@dataclasses.dataclass(frozen=True)
class NodeGroup:
    name: str
    hosts: tuple[str, ...] = ()
    hostnames: tuple[str, ...] = ()
    cpu: dict | None = None
    smt: bool | None = None
    nps: int | None = None
    scratch: str | None = None
    slurm: dict | None = None
    rdma: dict | None = None
    bmc: dict | None = None
    cpu_frequency: dict | None = None
    memory: str | None = None

    def scratch_of(self, host: str) -> str | None:
        """The scratch directory of one node ({host} is the node's name)."""
        return self.scratch.replace("{host}", host) if self.scratch else None

    def bmc_address_of(self, host: str) -> str | None:
        address = (self.bmc or {}).get("address")
        return address.replace("{host}", host) if address else None

    def slurm_access(self) -> list[str]:
        """sbatch options that put a job on this group's nodes (and, on nodes shared between
        jobs, the memory it asks for: ReFrame gives --ntasks itself)."""
        if not self.slurm:
            return []
        return ([f"--{key}={self.slurm[key]}" for key in ("partition", "qos", "mem")
                 if key in self.slurm] + (["--exclusive"] if self.slurm.get("exclusive") else []))

    def memory_mib(self) -> int | None:
        """Each node's memory in MiB (the facts' `memory`), or None."""
        return mib(self.memory) if self.memory else None

    def choice_access(self, what: str) -> list[str]:
        """sbatch options of a user's choice for `what` (`short`, `large_memory`): the
        partition and QoS it names, in place of the group's own."""
        choice = (self.slurm or {}).get(what) or {}
        return [f"--{key}={choice[key]}" for key in ("partition", "qos") if key in choice]

    def srun_options(self) -> list[str]:
        """Options every srun on these nodes needs (the site's placement rules)."""
        return list((self.slurm or {}).get("srun", []))

    def mpi_launcher_options(self) -> list[str]:
        """srun options of MPI launches (the PMI plugin, where the site's default is none)."""
        mpi = (self.slurm or {}).get("mpi")
        return [f"--mpi={mpi}"] if mpi else []

    def summary(self) -> str:
        """The nodes in a few words, e.g. `2 x 64-core AMD EPYC 7742, SMT off, NPS4`."""
        cpu = self.cpu or {}
        words = []
        if {"sockets", "cores_per_socket", "model"} <= set(cpu):
            words.append(f"{cpu['sockets']} x {cpu['cores_per_socket']}-core {cpu['model']}")
        if self.smt is not None:
            words.append(f"SMT {'on' if self.smt else 'off'}")
        if self.nps is not None:
            words.append(f"NPS{self.nps}")
        return ", ".join(words)

    def reframe_processor(self) -> dict | None:
        """ReFrame's `processor`: the CPUs a job of the partition gets (the checks size their
        ranks by it). A whole node, with its hardware threads unless every srun asks for one
        task per core (--hint=nomultithread); on nodes shared between jobs, the cores one job
        asks for. None (ReFrame detects it) without a full CPU."""
        cpu = self.cpu or {}
        if not {"sockets", "cores_per_socket"} <= set(cpu):
            return None
        slurm = self.slurm or {}
        if slurm.get("shared"):
            cores = slurm["cpus"]
            processor = {"arch": cpu["target"], "num_cpus": cores, "num_cpus_per_core": 1,
                         "num_cpus_per_socket": cores, "num_sockets": 1}
            processor.update({k: cpu[k] for k in ("vendor", "model") if k in cpu})
            return processor
        threads = 2 if self.smt and "--hint=nomultithread" not in self.srun_options() else 1
        per_socket = cpu["cores_per_socket"] * threads
        processor = {"arch": cpu["target"], "num_cpus": per_socket * cpu["sockets"],
                     "num_cpus_per_core": threads, "num_cpus_per_socket": per_socket,
                     "num_sockets": cpu["sockets"]}
        processor.update({k: cpu[k] for k in ("vendor", "model") if k in cpu})
        return processor


@dataclasses.dataclass(frozen=True)
class Site:
    name: str
    description: str
    os: str
    libc: str
    scheduler: str
    systems: tuple[str, ...]
    file_systems: tuple[dict, ...]
    nodes: dict[str, NodeGroup]
    programming_environment: dict | None = None
    account: dict | None = None
    #: the site's own ecCodes definitions, searched in this order before ecCodes' own:
    #: absolute directories and Spack package names (facts `grib_definitions`)
    grib_definitions: tuple[str, ...] = ()

    @property
    def grib_definition_dirs(self) -> tuple[str, ...]:
        """The directories of `grib_definitions`, in order."""
        return tuple(d for d in self.grib_definitions if d.startswith("/"))

    @property
    def grib_definition_packages(self) -> tuple[str, ...]:
        """The Spack packages of `grib_definitions` (each installs its definitions in
        <prefix>/share/eccodes/definitions), in order."""
        return tuple(d for d in self.grib_definitions if not d.startswith("/"))

    def missing_grib_definitions(self) -> str | None:
        """One line naming the declared definition directories this node lacks; None when
        every one is a directory here (run on the site's nodes: elsewhere they are not)."""
        missing = [d for d in self.grib_definition_dirs if not pathlib.Path(d).is_dir()]
        if not missing:
            return None
        return (f"site {self.name}: grib_definitions {', '.join(missing)} "
                f"{'is no directory' if len(missing) == 1 else 'are no directories'} on this "
                f"node (sites/{self.name}.yaml grib_definitions): GRIB that needs them "
                "cannot be decoded here")

    def slurm_account(self, given: str | None = None) -> str | None:
        """The Slurm account this site's jobs charge: `given` (bin/iostack's --account), else
        the facts' `account.name`; None where the centre needs none. FactsError, one line,
        where the centre refuses jobs without one and none is given, or one not of the
        centre's form."""
        policy = self.account or {}
        name = given or policy.get("name")
        where = f"sites/{self.name}.yaml account"
        if not name:
            if policy.get("required"):
                raise FactsError(f"site {self.name}: its scheduler refuses every job without "
                                 f"an account ({where}.required): give one with --account "
                                 f"NAME or as {where}.name; nothing was submitted")
            return None
        if policy.get("pattern") and not re.fullmatch(policy["pattern"], name):
            raise FactsError(f"site {self.name}: account {name!r} is not of the form its "
                             f"centre's accounts have ({where}.pattern "
                             f"{policy['pattern']!r}); nothing was submitted")
        return name

    @property
    def target(self) -> str:
        """The Spack target the stack is built for: the one target of the node groups."""
        (target,) = {g.cpu["target"] for g in self.nodes.values() if g.cpu}
        return target

    @property
    def hostnames(self) -> list[str]:
        """Regular expressions of every node's name (ReFrame's system `hostnames`)."""
        return [h for g in self.nodes.values() for h in g.hostnames]

    def file_system_of(self, path: str, group: str | None = None) -> dict | None:
        """The declared file system a path is on (the longest mount that contains it), of those
        a node group mounts when `group` is given."""
        found = [fs for fs in self.file_systems
                 if (path == fs["mount"] or path.startswith(fs["mount"].rstrip("/") + "/"))
                 and (group is None or group in fs.get("nodes", self.nodes))]
        return max(found, key=lambda fs: len(fs["mount"]), default=None)

    def io_features(self, group: str) -> list[str]:
        """ReFrame features of a node group's scratch: `lustre` or `nvme` (its file system)."""
        scratch = self.nodes[group].scratch
        fs = self.file_system_of(scratch, group) if scratch else None
        return [fs["type"]] if fs and fs["type"] in ("lustre", "nvme") else []


def mib(size: str) -> int:
    """MiB of a size as the facts write it (512G, 500000M, 1T)."""
    return int(size[:-1]) << {"M": 0, "G": 10, "T": 20}[size[-1]]


def names() -> list[str]:
    """The sites that have a facts file."""
    return sorted(p.stem for p in FACTS.glob("*.yaml") if p.name != SCHEMA.name)


@functools.cache
def _validator():
    import jsonschema
    import yaml

    schema = yaml.safe_load(SCHEMA.read_text())
    return jsonschema.Draft202012Validator(schema)


def read(path: pathlib.Path) -> Site:
    """A facts file, validated; FactsError (one line naming the file) if it is not right."""
    import yaml

    where = _shown(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise FactsError(f"{where}: cannot read: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise FactsError(f"{where}: not YAML: {str(e).splitlines()[0]}") from None
    error = next(iter(sorted(_validator().iter_errors(data), key=lambda e: list(e.path))), None)
    if error is not None:
        at = "/".join(str(p) for p in error.path) or "top level"
        raise FactsError(f"{where}: {at}: {error.message}")
    site = Site(
        name=data["name"], description=data["description"], os=data["os"], libc=data["libc"],
        scheduler=data["scheduler"], systems=tuple(data.get("systems") or [data["name"]]),
        file_systems=tuple({"shared": True, **fs} for fs in data.get("file_systems", [])),
        programming_environment=data.get("programming_environment"),
        account=data.get("account"),
        grib_definitions=tuple(data.get("grib_definitions", [])),
        nodes={name: NodeGroup(name=name, **_group_fields(group))
               for name, group in data["nodes"].items()})
    problem = _inconsistency(site, path)
    if problem:
        raise FactsError(f"{where}: {problem}")
    return site


def _group_fields(group: dict) -> dict[str, Any]:
    """A node group's fields as NodeGroup takes them (lists as tuples: it is frozen)."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in group.items()}


def _inconsistency(site: Site, path: pathlib.Path) -> str | None:
    """What the schema cannot say; None when the facts hold together."""
    import archspec.cpu

    if site.name != path.stem:
        return f"name {site.name!r} differs from the file's name {path.stem!r}"
    targets = {g.cpu["target"] for g in site.nodes.values() if g.cpu}
    if len(targets) != 1:
        return (f"the node groups' cpu targets are {sorted(targets)}; the stack is built for "
                "one target, so give exactly one")
    account = site.account or {}
    if "pattern" in account:
        try:
            re.compile(account["pattern"])
        except re.error as e:
            return f"account/pattern: {account['pattern']!r} is not a regular expression: {e}"
        if "name" in account and not re.fullmatch(account["pattern"], account["name"]):
            return (f"account/name: {account['name']!r} is not of the form account/pattern "
                    f"{account['pattern']!r}")
    for i, entry in enumerate(site.grib_definitions):
        where = f"grib_definitions/{i}: {entry!r}"
        if entry.startswith("/"):
            if ":" in entry:
                return (f"{where}: a directory with ':' in its name cannot be on ecCodes' "
                        "definition path (':' separates its entries)")
            if entry != str(pathlib.PurePosixPath(entry)) or "/../" in f"{entry}/":
                return f"{where}: give the directory plainly (no '..', '.', '//', trailing '/')"
        elif not SPACK_PACKAGE.fullmatch(entry):
            return (f"{where} is neither an absolute directory (a relative path means nothing "
                    "on the nodes: give it from /) nor a Spack package's name")
    for fs in site.file_systems:
        unknown = sorted(set(fs.get("nodes", [])) - set(site.nodes))
        if unknown:
            return (f"file_systems: {fs['mount']} names node groups {unknown} that nodes does "
                    f"not have ({', '.join(site.nodes)})")
    for group in site.nodes.values():
        cpu = group.cpu or {}
        micro = archspec.cpu.TARGETS.get(cpu.get("target"))
        if cpu and micro is None:
            return f"nodes/{group.name}/cpu/target: {cpu['target']!r} is not a Spack (archspec) target"
        if "vendor" in cpu and micro.vendor != ARCHSPEC_VENDORS[cpu["vendor"]]:
            return (f"nodes/{group.name}/cpu: target {micro.name} is a {micro.vendor} CPU, "
                    f"not {cpu['vendor']}")
        if group.scratch and site.file_system_of(group.scratch, group.name) is None:
            mounted = [fs["mount"] for fs in site.file_systems
                       if group.name in fs.get("nodes", site.nodes)]
            return (f"nodes/{group.name}/scratch: {group.scratch} is on none of the file_systems "
                    f"these nodes mount ({', '.join(mounted) or 'none declared'})")
        freq = group.cpu_frequency or {}
        for key in ("default_khz", "performance_khz"):
            if key in freq and freq[key] not in freq["available_khz"]:
                return (f"nodes/{group.name}/cpu_frequency/{key}: {freq[key]} is not one of "
                        f"available_khz {freq['available_khz']}")
        if site.scheduler == "slurm" and group.cpu and not group.slurm:
            return f"nodes/{group.name}: compute nodes of a Slurm site need slurm: partition"
        for pattern in group.hostnames:
            try:
                re.compile(pattern)
            except re.error as e:
                return f"nodes/{group.name}/hostnames: {pattern!r} is not a regular expression: {e}"
    return None


def _shown(path: pathlib.Path) -> str:
    try:
        return str(path.relative_to(paths.REPO))
    except ValueError:
        return str(path)


@functools.cache
def load(site: str) -> Site:
    """The facts of a site (sites/<site>.yaml); FactsError if absent or wrong."""
    path = FACTS / f"{site}.yaml"
    if not path.is_file():
        raise FactsError(f"{_shown(path)}: no facts file for site {site!r} "
                         f"(sites with one: {', '.join(names())})")
    return read(path)


def site_of_system(system: str) -> str:
    """The site whose facts list a ReFrame system."""
    for name in names():
        if system in load(name).systems:
            return name
    raise FactsError(f"no sites/<site>.yaml lists ReFrame system {system!r}")


def spack_sites():
    return sorted(p.name for p in paths.SPACK_ENV_SITES.iterdir() if (p / "spack.yaml").is_file())


def spack_envs(site: str) -> list[str]:
    """A site's Spack environments besides its default (spack-env/sites/<site>/spack.yaml):
    spack-env/sites/<site>/<env>/spack.yaml, each reading the site's packages.yaml."""
    top = paths.SPACK_ENV_SITES / site
    if not top.is_dir():
        return []
    return sorted(p.name for p in top.iterdir() if (p / "spack.yaml").is_file())


def spack_env(site: str, env: str | None) -> SpackEnv:
    """A site's Spack environment: its default (`env` None) or another of its own."""
    if not env:
        return SpackEnv(site)
    if env not in spack_envs(site):
        raise FactsError(f"site {site} has no environment {env!r}; its environments: "
                         f"{', '.join(spack_envs(site)) or 'none besides the default'}")
    return SpackEnv(site, env)


def all_spack_envs() -> list[SpackEnv]:
    """Every site's default environment and its others, as locks name them."""
    return [SpackEnv(site, env) for site in spack_sites()
            for env in [None, *spack_envs(site)]]


def check_spack_env(name: str) -> SpackEnv:
    """`site` or `site/env`, checked."""
    wanted = SpackEnv.parse(name)
    return spack_env(check_site(wanted.site), wanted.env)


def ansible_sites():
    if not paths.ANSIBLE_INVENTORIES.is_dir():
        return []
    return sorted(p.name for p in paths.ANSIBLE_INVENTORIES.iterdir()
                  if p.is_dir() and p.name != "common")


def reframe_systems(site: str | None = None) -> list[str]:
    """The ReFrame systems of a site (every site's, without one), as its facts list them:
    its ReFrame configuration (reframe-tests/config/<site>.py) defines exactly these."""
    sites = [site] if site else names()
    return sorted(s for name in sites for s in load(name).systems)


def check_site(site: str) -> str:
    """The site, if it has a Spack environment and sound facts; else FactsError."""
    known = spack_sites()
    if site not in known:
        raise FactsError(f"unknown site {site!r}; known sites: {', '.join(known)}")
    load(site)
    return site
