"""A throwaway multi-node Slurm cluster on this machine: the `local-cluster` ReFrame system,
where [OCI-OpenFOAM]'s inter-node runs and NVMe staging go through sbatch, srun and ssh,
and the per-node hardware checks run node by node.

    iostack-testbed cluster up [--state-dir DIR] [--blank-scratch]
    eval "$(iostack-testbed cluster env)"       # SLURM_CONF, IOSTACK_CLUSTER_SSH_CONFIG
    iostack-testbed cluster status
    iostack-testbed cluster down
    iostack-testbed run cluster -- bin/iostack nightly --system local-cluster

The nodes and their facts are the hosts of group `compute` in
ansible/inventories/local-cluster. Each node is a network namespace (a veth to a bridge
on this host), a UTS namespace (its hostname) and a mount namespace, all three kept as
files (under <state>/ns and /run/netns), so no process has to hold them open. In each run
its own slurmd and sshd. Private to a node: /mnt/localdisk (the XFS on its own loop
device, its "local NVMe"), /dev/shm, /etc/hosts, /etc/fstab, /etc/ssh/ssh_config and
/run/iostack-node (the link naming its scratch device and, for NPS2 and SMT nodes, the
emulated sysfs the inventory points at and hwloc's description of their layout, which a
TaskProlog gives their jobs; Slurm's node line describes them alike, and task/affinity
binds every task). The rest of the host's file
system is what every node sees: the cluster's shared storage. munged (one, shared) and
slurmctld run on the host, the controller at the bridge's address.

Every name the cluster gives (namespaces, links, loop device backing files, mounts) is
derived from its state directory, so `down` finds all of it from the directory alone:
after a crash, a killed `up`, or a clean run. `up` runs it itself when it fails.

Needs root, iproute2, util-linux, xfsprogs, openssh-server, slurm-wlm and munge. On the
host it creates, when missing, only the empty mount points the nodes' private mounts need:
/mnt/localdisk, /run/iostack-node, /var/lib/iostack (the roles' records, one per node) and
sshd's privilege separation directory /run/sshd.
"""
from __future__ import annotations

import argparse
import hashlib
import ipaddress
import json
import os
import pathlib
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from iostack.core import account, paths
from iostack.core.settings import Settings
from iostack.site import inventory
from iostack_testbed import slurm
from iostack_testbed.errors import TestbedError

INVENTORY = paths.ANSIBLE_INVENTORIES / "local-cluster"
GROUP = "compute"
# node-private: the emulated device link and sysfs the inventory names
NODE_RUN = pathlib.Path("/run/iostack-node")
# node-private: what the roles record (nvme_scratch's devices), as on a real node
NODE_STATE = pathlib.Path("/var/lib/iostack")
SCRATCH_IMAGE_BYTES = 512 << 20      # sparse; mkfs.xfs wants at least 300 MB
SLURMD_PORT = 6818                   # every node has its own network namespace
TOOLS = ("ip", "unshare", "nsenter", "losetup", "mkfs.xfs", "blkid", "mount", "umount",
         "sshd", "ssh", "ssh-keygen", "munged", "slurmctld", "slurmd", "sinfo", "scancel")
SYSTEM_PATH = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
#: the nodes' slurmd (and so their jobs) ahead of whatever else this machine runs, as a real
#: node has its cores to itself
NODE_NICE = -10


class ClusterError(TestbedError):
    """The cluster cannot start (or stop) here; the message says why."""


def service_account():
    """The account root's bin/iostack runs the nightly as (iostack.core.account), if any."""
    if os.geteuid() != 0:
        return None
    return account.lookup(Settings.from_environ(os.environ).user)


def _tool(name: str) -> str:
    found = shutil.which(name, path=SYSTEM_PATH)
    if not found:
        raise ClusterError(f"{name} not found: apt-get install iproute2 util-linux xfsprogs "
                           "openssh-server slurm-wlm munge")
    return found


def unavailable_reason() -> str | None:
    """Why the cluster cannot start here, or None if it can."""
    if os.geteuid() != 0:
        return "the local cluster needs root (namespaces, loop devices, mounts, slurmd)"
    missing = [t for t in TOOLS if not shutil.which(t, path=SYSTEM_PATH)]
    if missing:
        return (f"missing {', '.join(missing)}: apt-get install iproute2 util-linux xfsprogs "
                "openssh-server slurm-wlm munge")
    return None


def _run(*argv, check=True, input=None, timeout=120) -> subprocess.CompletedProcess:
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, input=input,
                       timeout=timeout)
    if check and p.returncode != 0:
        raise ClusterError(f"{shlex.join(map(str, argv))} failed ({p.returncode}): "
                           f"{(p.stderr or p.stdout).strip()}")
    return p


def _partitions(device: str) -> list[pathlib.Path]:
    name = pathlib.Path(device).name
    return sorted(pathlib.Path("/sys/block", name).glob(f"{name}p*"))


def partition_holders(device: str) -> list[str]:
    """The processes, one per mount namespace, that have one of the device's partitions
    mounted. A namespace made (`unshare --mount`, private) while a partition was mounted keeps
    its copy of the mount after the host unmounts it, and with it the partition open."""
    numbers = {(part / "dev").read_text().strip() for part in _partitions(device)}
    holders: dict[str, str] = {}
    for proc in pathlib.Path("/proc").glob("[0-9]*"):
        try:
            namespace = os.readlink(proc / "ns" / "mnt")
            if namespace in holders:
                continue
            if any(line.split()[2] in numbers
                   for line in (proc / "mountinfo").read_text().splitlines()):
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                holders[namespace] = f"pid {proc.name} ({shlex.join(a.decode() for a in argv if a)})"
        except OSError:       # gone, or not ours to read
            continue
    return sorted(holders.values())


def drop_partitions(device: str, wait: float = 300.0, poll: float = 0.2) -> None:
    """Deletes the partitions partx added to a loop device: they outlive its detach, so a new
    image attached to the device would show an earlier user's partition, and the
    nvme_scratch role would refuse the device as holding data. While a partition is still
    mounted in another test's mount namespace, partx gets EBUSY: wait for that namespace to
    end (with its test), at most `wait` seconds, then name it."""
    deadline = time.monotonic() + wait
    while _partitions(device):
        p = _run(_tool("partx"), "-d", device, check=False)
        if not _partitions(device):
            return
        if time.monotonic() >= deadline:
            held = ", ".join(partition_holders(device)) or "no mount namespace (open elsewhere)"
            raise ClusterError(f"{device}: its partitions are still in use after {wait:.0f} s, "
                               f"mounted by {held}: {(p.stderr or p.stdout).strip()}")
        time.sleep(poll)


def _natural(name: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def used_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """IPv4 networks this host already has an address or a route in."""
    nets = []
    for what in ("addr", "route"):
        out = _run(_tool("ip"), "-j", "-4", what, "show").stdout or "[]"
        for entry in json.loads(out):
            for info in entry.get("addr_info", []) if what == "addr" else [entry]:
                local = info.get("local")
                dst = info.get("dst")
                if local:
                    nets.append(ipaddress.ip_network(f"{local}/{info.get('prefixlen', 32)}",
                                                     strict=False))
                elif dst and dst != "default":
                    nets.append(ipaddress.ip_network(dst if "/" in dst else f"{dst}/32",
                                                     strict=False))
    return nets


def pick_subnet(tag: str, used) -> ipaddress.IPv4Network:
    """A /24 in 10.214.0.0/16 overlapping nothing in `used`, starting from the tag's."""
    start = int(tag, 16) % 250
    for k in range(250):
        net = ipaddress.IPv4Network(f"10.214.{(start + k) % 250 + 1}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise ClusterError("no free /24 in 10.214.0.0/16 for the cluster's bridge")


def emulated_sysfs(root: pathlib.Path, nps: int, real: pathlib.Path = pathlib.Path("/sys"),
                   smt: bool | None = None):
    """A sysfs tree with this machine's CPUs, packages and SMT state, each package split
    into `nps` NUMA nodes: what the kernel would show had the BIOS booted NPS<nps>; with
    `smt` given, the SMT state a BIOS with SMT on (or off) boots."""
    cpu_dir = real / "devices/system/cpu"
    packages: dict[str, list[int]] = {}
    for cpu in sorted(cpu_dir.glob("cpu[0-9]*"), key=lambda p: int(p.name[3:])):
        pkg = cpu / "topology" / "physical_package_id"
        if pkg.is_file():
            packages.setdefault(pkg.read_text().strip(), []).append(int(cpu.name[3:]))
    out_cpu = root / "devices/system/cpu"
    numa = 0
    for package, cpus in sorted(packages.items()):
        for number in cpus:
            topo = out_cpu / f"cpu{number}" / "topology"
            topo.mkdir(parents=True, exist_ok=True)
            (topo / "physical_package_id").write_text(package + "\n")
        share = -(-len(cpus) // nps)
        for part in range(nps):
            node = root / "devices/system/node" / f"node{numa}"
            node.mkdir(parents=True, exist_ok=True)
            (node / "cpulist").write_text(",".join(map(str, cpus[part * share:(part + 1) * share]))
                                          + "\n")
            numa += 1
    (root / "devices/system/node" / "online").write_text(f"0-{numa - 1}\n")
    (out_cpu / "smt").mkdir(parents=True, exist_ok=True)
    for name in ("control", "active"):
        src = cpu_dir / "smt" / name
        if smt is not None:
            # SMT off in the BIOS hides the sibling threads: the kernel says notsupported
            state = {"control": "on", "active": "1"} if smt else \
                {"control": "notsupported", "active": "0"}
            (out_cpu / "smt" / name).write_text(state[name] + "\n")
        elif src.is_file():
            (out_cpu / "smt" / name).write_text(src.read_text())


# node-private: executables a node's "reboot" runs before its slurmd comes back (what the
# firmware applies at boot; tests put a BMC's pending BIOS settings there)
REBOOT_HOOKS = NODE_RUN / "reboot.d"


def reboot_node(state: pathlib.Path) -> int:
    """The local cluster's RebootProgram, which slurmd runs in the node's namespaces on
    `scontrol reboot`: a node's reboot, as far as one machine can give it. The node's
    reboot.d hooks run in name order, then a detached helper stops the node's slurmd and
    starts it again in a new time namespace whose boot time is now: slurmctld takes a node
    for rebooted only once it registers with a later boot time. The running jobs of other
    nodes are not touched; this node has none (Slurm drained it first)."""
    node = socket.gethostname()
    hooks = sorted(h for h in REBOOT_HOOKS.glob("*") if os.access(h, os.X_OK)) \
        if REBOOT_HOOKS.is_dir() else []
    for hook in hooks:
        p = subprocess.run([str(hook)], capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            print(f"iostack: error: {node}: reboot hook {hook} failed ({p.returncode}): "
                  f"{(p.stderr or p.stdout).strip()}", file=sys.stderr)
            return 1
    conf = state / "etc" / "slurm.conf"
    pidfile = state / "run" / f"slurmd-{node}.pid"
    # the new slurmd's uptime starts at 0 (whole seconds: slurmctld's boot time is now minus
    # it), a second after the reboot request at least. Offsets count from the machine's
    # clock, and this may already run in the time namespace of an earlier "reboot": add its
    # offset back.
    # (the old slurmd may stay a zombie of whoever started the cluster: gone all the same)
    restart = (f"pid=$(cat {shlex.quote(str(pidfile))}); kill $pid; "
               "while kill -0 $pid 2>/dev/null && "
               "[ \"$(awk '{print $3}' /proc/$pid/stat 2>/dev/null)\" != Z ]; do sleep 0.2; done; "
               "sleep 1; "
               "off=$(awk '$1 == \"boottime\" {print $2}' /proc/self/timens_offsets); "
               "up=$(( $(cut -d. -f1 /proc/uptime) - ${off:-0} )); "
               f"exec {_tool('unshare')} --fork --time --boottime -$up "
               f"{_tool('slurmd')} -D -f {shlex.quote(str(conf))}")
    with open(state / "log" / f"slurmd-{node}.console", "ab") as log:
        subprocess.Popen(["sh", "-c", restart], stdin=subprocess.DEVNULL, stdout=log,
                         stderr=subprocess.STDOUT, start_new_session=True,
                         env=dict(os.environ, SLURM_CONF=str(conf)))
    return 0


# node-private: hwloc's description of a node whose layout is emulated (TaskProlog below)
HWLOC_SYNTHETIC = NODE_RUN / "hwloc-synthetic"


def emulated_layout(hardware: dict[str, str], nps: int, smt: bool) -> tuple[dict[str, str], str]:
    """This machine as a node whose BIOS booted NPS`nps` with SMT `smt` shows itself: the
    node line's layout for Slurm (each NUMA domain a socket, as Slurm's numa_node_as_socket
    counts them; pairs of CPUs a core's two hardware threads) and hwloc's synthetic
    description of the same, which the node's jobs see (HWLOC_SYNTHETIC). Slurm binds by its
    layout, so a job's CPUs are where they would be on such a node; hwloc names them alike."""
    sockets = int(hardware.get("SocketsPerBoard", 1)) * int(hardware.get("Boards", 1))
    cores, threads = int(hardware.get("CoresPerSocket", 1)), int(hardware.get("ThreadsPerCore", 1))
    if cores % nps:
        raise ClusterError(f"{cores} cores per socket cannot be split into NPS{nps}")
    cores //= nps
    if smt and threads == 1:
        if cores % 2:
            raise ClusterError(f"{cores} cores per NUMA domain cannot be paired as SMT threads")
        cores, threads = cores // 2, 2
    layout = {"Boards": "1", "SocketsPerBoard": str(sockets * nps),
              "CoresPerSocket": str(cores), "ThreadsPerCore": str(threads)}
    return layout, f"package:{sockets} numa:{nps} core:{cores} pu:{threads}"


class Node:
    def __init__(self, name: str, index: int, facts: dict, prefix: str):
        self.name, self.index, self.facts = name, index, facts
        self.netns = f"{prefix}-{name}"
        self.veth = f"{prefix}h{index}"
        self.address = ""

    @property
    def nps(self) -> int:
        return int(self.facts.get("bios_nps", 1))

    @property
    def smt(self) -> bool:
        return bool(self.facts.get("bios_smt"))

    @property
    def emulated(self) -> bool:
        """Its BIOS state is emulated (its sysfs is the node's own, under NODE_RUN)."""
        return NODE_RUN in pathlib.Path(self.facts.get("bios_sysfs_root", "/sys")).parents

    @property
    def partition(self) -> str:
        """The inventory's `slurm_partition`, else nps<N> as on OCI [OCI-Tips-SlurmOps]."""
        return self.facts.get("slurm_partition") or f"nps{self.nps}"


class LocalCluster(slurm.LocalSlurm):
    """slurmctld and munged on this host, one slurmd and sshd per node namespace."""

    def __init__(self, state_dir, timeout: float = 120.0, blank_scratch: bool = False,
                 inventory_dir: pathlib.Path = INVENTORY):
        super().__init__(state_dir, timeout)
        self.blank_scratch = blank_scratch
        self.inventory_dir = pathlib.Path(inventory_dir)
        self.tag = hashlib.sha1(str(self.state).encode()).hexdigest()[:6]
        self.prefix = f"ios{self.tag}"
        self.bridge = f"{self.prefix}br"
        self.record = self.state / "cluster.json"
        self.ns_dir = self.state / "ns"
        self.nodes: list[Node] = []

    # paths and names -----------------------------------------------------------------
    @property
    def ssh_config(self) -> pathlib.Path:
        """The host's ssh client config for the nodes (ssh -F)."""
        return self.state / "ssh" / "config"

    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf), "IOSTACK_CLUSTER_SSH_CONFIG": str(self.ssh_config)}

    def step_socket(self) -> pathlib.Path:
        """As LocalSlurm's, in the longest-named node's own spool directory."""
        name = max([n.name for n in self.nodes] or ["node99"], key=len)
        return self.state / "spool" / name / f"{name}_{'9' * 5}.4294967291"

    def node_dir(self, node: Node) -> pathlib.Path:
        return self.state / "nodes" / node.name

    def ns_file(self, node: Node, kind: str) -> pathlib.Path:
        return self.ns_dir / f"{node.name}.{kind}"

    def on(self, node: Node, *argv) -> list[str]:
        """argv run inside a node's namespaces."""
        return [_tool("nsenter"), f"--net=/run/netns/{node.netns}",
                f"--mount={self.ns_file(node, 'mnt')}", f"--uts={self.ns_file(node, 'uts')}",
                "--", *map(str, argv)]

    def daemon_logs(self) -> list[str]:
        return ["slurmctld", "munged"] + [f"{d}-{n.name}" for n in self.nodes
                                          for d in ("slurmd", "sshd")]

    # facts ---------------------------------------------------------------------------
    def read_facts(self) -> list[Node]:
        try:
            inv = inventory.load(self.inventory_dir)
        except inventory.InventoryError as e:
            raise ClusterError(str(e)) from None
        names = sorted(inventory.hosts(inv, GROUP), key=_natural)
        if len(names) < 2:
            raise ClusterError(f"{self.inventory_dir}: group {GROUP} needs at least 2 hosts, "
                               f"has {len(names)}")
        nodes = [Node(n, i + 1, inventory.hostvars(inv, n), self.prefix)
                 for i, n in enumerate(names)]
        for node in nodes:
            for key in ("nvme_scratch_mount", "nvme_scratch_devices", "nvme_scratch_label",
                        "nvme_scratch_mount_opts"):
                if not node.facts.get(key):
                    raise ClusterError(f"{self.inventory_dir}: {node.name} has no {key}")
            if len(node.facts["nvme_scratch_devices"]) != 1 or not str(
                    node.facts["nvme_scratch_devices"][0]).startswith(f"{NODE_RUN}/"):
                raise ClusterError(f"{self.inventory_dir}: {node.name}: nvme_scratch_devices "
                                   f"must be one path under {NODE_RUN}")
        return nodes

    def partition_nodes(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for node in sorted(self.nodes, key=lambda n: (n.smt, n.nps)):
            out.setdefault(node.partition, []).append(node.name)
        return out

    def node_line(self, hardware: dict[str, str], node: Node) -> str:
        if node.emulated:
            hardware = {**hardware, **emulated_layout(hardware, node.nps, node.smt)[0]}
        return slurm.node_line(hardware, node.name, node.address)

    # up ------------------------------------------------------------------------------
    def is_up(self) -> bool:
        if not self.record.is_file():
            return False
        return json.loads(self.record.read_text()).get("status") in ("starting", "up")

    def start(self) -> "LocalCluster":
        reason = unavailable_reason()
        if reason:
            raise slurm.SlurmUnavailable(reason)
        if self.is_up():
            raise ClusterError(f"a cluster is already up in {self.state}: run "
                               f"`iostack-testbed cluster down --state-dir {self.state}` first")
        self.nodes = self.read_facts()
        for place in {NODE_RUN, *(pathlib.Path(n.facts["nvme_scratch_mount"]) for n in self.nodes)}:
            if self.state == place or place in self.state.parents:
                raise ClusterError(f"state directory {self.state} is under {place}, which "
                                   "is private to each node; use another")
        self.down(quiet=True)   # whatever a crashed run in this directory left
        self.partitions = list(self.partition_nodes())
        try:
            self._plan()
            self._write_files()
            self._network()
            self._namespaces()
            self._scratch()
            self._daemons()
            self._write_record("up")
        except BaseException:
            self.down(quiet=True)
            raise
        return self

    def _write_record(self, status: str) -> None:
        self.record.write_text(json.dumps({
            "status": status, "tag": self.tag, "subnet": str(self.subnet),
            "bridge": self.bridge, "controller": self.controller,
            "partitions": self.partition_nodes(), "slurm_conf": str(self.conf),
            "ssh_config": str(self.ssh_config),
            "nodes": [{"name": n.name, "address": n.address, "netns": n.netns,
                       "partition": n.partition} for n in self.nodes]}, indent=1) + "\n")

    def _plan(self) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        self.subnet = pick_subnet(self.tag, used_networks())
        hosts = list(self.subnet.hosts())
        self.bridge_address = str(hosts[0])
        for node in self.nodes:
            node.address = str(hosts[9 + node.index])   # nodeN at .10+N
        self.controller: dict[str, Any] = {"name": socket.gethostname().split(".")[0],
                                           "address": self.bridge_address,
                                           "port": slurm.free_port()}
        # written before anything is made, so a killed `up` leaves a record to clean up by
        self._write_record("starting")

    def _write_files(self) -> None:
        self.prepare_state()
        hardware = slurm.node_hardware()
        self.conf.write_text(slurm.cluster_conf(
            self.state, self.munge_socket,
            controller=f"{self.controller['name']}({self.controller['address']})",
            ctld_port=self.controller["port"], slurmd_port=SLURMD_PORT,
            nodes=[self.node_line(hardware, n) for n in self.nodes],
            partitions=self.partition_nodes(), per_node=True,
            # tasks bound to their CPUs, as Oracle Japan's Slurm does [OCI-Tips-Slurm]
            task_plugin="task/affinity",
            extra=(
                # the emulated nodes' hwloc topology in their tasks' environment
                f"TaskProlog={self.state}/etc/task-prolog",
                # every node claims this machine's CPUs and memory
                "SlurmdParameters=config_overrides",
                # PMIx's client directories: per node, as /tmp is on a real node
                f"TmpFS={self.state}/tmp/%n",
                # `scontrol reboot`: what rebooting a node means here (reboot_node below),
                # and how long slurmctld waits for it to register again
                f"RebootProgram={self.state}/etc/reboot-node", "ResumeTimeout=300")))
        etc = self.state / "etc"
        reboot = etc / "reboot-node"
        reboot.write_text("#!/bin/sh\n# RebootProgram of the iostack local cluster\n"
                          f"PYTHONPATH={shlex.quote(str(paths.REPO / 'lib'))}:"
                          f"{shlex.quote(str(paths.REPO / 'tools' / 'testbed'))} exec "
                          f"{shlex.quote(sys.executable)} -m iostack_testbed cluster reboot-node "
                          f"--state-dir {shlex.quote(str(self.state))}\n")
        reboot.chmod(0o755)
        prolog = etc / "task-prolog"
        # slurmstepd reads `export NAME=value` lines; the value is the rest of the line
        prolog.write_text(
            "#!/bin/sh\n# TaskProlog of the iostack local cluster: on a node whose NPS/SMT is "
            "emulated, hwloc\n# describes it as its BIOS would have booted it\n"
            f"if [ -r {HWLOC_SYNTHETIC} ]; then\n"
            f"  echo \"export HWLOC_SYNTHETIC=$(cat {HWLOC_SYNTHETIC})\"\n"
            "  echo export HWLOC_THISSYSTEM=1\nfi\n")
        prolog.chmod(0o755)
        (etc / "hosts").write_text("127.0.0.1 localhost\n" + "".join(
            f"{n.address} {n.name}\n" for n in self.nodes))
        self._write_ssh()
        for node in self.nodes:
            for per_node in ("tmp", "spool"):
                (self.state / per_node / node.name).mkdir(parents=True, exist_ok=True)
            # fresh disks each `up`: no record of an earlier cluster's
            for private in ("run", "state"):
                if (self.node_dir(node) / private).exists():
                    shutil.rmtree(self.node_dir(node) / private)
            (self.node_dir(node) / "run" / "dev").mkdir(parents=True)
            (self.node_dir(node) / "state").mkdir()
            (self.node_dir(node) / "fstab").write_text(
                f"# {node.name}'s /etc/fstab (iostack local-cluster)\n")
            if node.emulated:
                sysfs = pathlib.Path(node.facts["bios_sysfs_root"])
                emulated_sysfs(self.node_dir(node) / "run" / sysfs.relative_to(NODE_RUN),
                               node.nps, smt=True if node.smt else None)
                (self.node_dir(node) / "run" / HWLOC_SYNTHETIC.relative_to(NODE_RUN)).write_text(
                    emulated_layout(hardware, node.nps, node.smt)[1] + "\n")

    def _write_ssh(self) -> None:
        ssh = self.state / "ssh"
        ssh.mkdir(exist_ok=True)
        # the host keys stay root's (0600); the rest is read by whoever runs the jobs
        os.chmod(ssh, 0o755)
        keygen = _tool("ssh-keygen")
        for key in ["id_ed25519"] + [f"host_{n.name}" for n in self.nodes]:
            if not (ssh / key).exists():
                _run(keygen, "-q", "-t", "ed25519", "-N", "", "-C", f"iostack-cluster {key}",
                     "-f", ssh / key)
        user = service_account()
        if user is not None:
            # the jobs of a nightly root runs run as the service account, and log in to the
            # nodes as it: its key (ssh refuses a key its owner's others may read; root
            # reads any)
            os.chown(ssh / "id_ed25519", user.uid, user.gid)
        shutil.copy(ssh / "id_ed25519.pub", ssh / "authorized_keys")
        (ssh / "known_hosts").write_text("".join(
            f"{n.name},{n.address} "
            + " ".join((ssh / f"host_{n.name}.pub").read_text().split()[:2]) + "\n"
            for n in self.nodes))
        # as whoever runs ssh: root from the host, the jobs' user on the nodes
        client = (f"Host *\n  IdentityFile {ssh / 'id_ed25519'}\n"
                  "  IdentitiesOnly yes\n  BatchMode yes\n  StrictHostKeyChecking yes\n"
                  f"  UserKnownHostsFile {ssh / 'known_hosts'}\n"
                  "  GlobalKnownHostsFile /dev/null\n  LogLevel ERROR\n  ConnectTimeout 10\n")
        # nodes resolve each other through their /etc/hosts, as on a cluster
        (self.state / "etc" / "ssh_config").write_text(client)
        self.ssh_config.write_text("".join(f"Host {n.name}\n  HostName {n.address}\n"
                                           for n in self.nodes) + client)
        (self.state / "etc" / "sshd_config").write_text(
            f"AuthorizedKeysFile {ssh / 'authorized_keys'}\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nPrintMotd no\n"
            # the state directory may sit under /tmp, which StrictModes refuses
            "StrictModes no\nSubsystem sftp internal-sftp\n")

    def _network(self) -> None:
        ip = _tool("ip")
        _run(ip, "link", "add", self.bridge, "type", "bridge")
        _run(ip, "addr", "add", f"{self.bridge_address}/{self.subnet.prefixlen}", "dev",
             self.bridge)
        _run(ip, "link", "set", self.bridge, "up")
        for node in self.nodes:
            peer = f"{self.prefix}p{node.index}"
            _run(ip, "netns", "add", node.netns)
            _run(ip, "link", "add", node.veth, "type", "veth", "peer", "name", peer)
            _run(ip, "link", "set", node.veth, "master", self.bridge, "up")
            _run(ip, "link", "set", peer, "netns", node.netns)
            _run(ip, "-n", node.netns, "link", "set", peer, "name", "eth0")
            _run(ip, "-n", node.netns, "addr", "add",
                 f"{node.address}/{self.subnet.prefixlen}", "dev", "eth0")
            _run(ip, "-n", node.netns, "link", "set", "eth0", "up")
            _run(ip, "-n", node.netns, "link", "set", "lo", "up")

    def _namespaces(self) -> None:
        for place in {NODE_RUN, NODE_STATE, pathlib.Path("/run/sshd"),
                      *(pathlib.Path(n.facts["nvme_scratch_mount"]) for n in self.nodes)}:
            place.mkdir(parents=True, exist_ok=True)
        # a mount namespace can be kept in a file only on a mount that does not propagate
        self.ns_dir.mkdir(exist_ok=True)
        _run(_tool("mount"), "--bind", self.ns_dir, self.ns_dir)
        _run(_tool("mount"), "--make-private", self.ns_dir)
        etc = self.state / "etc"
        for node in self.nodes:
            for kind in ("mnt", "uts"):
                self.ns_file(node, kind).touch()
            # slave: the host's unmounts reach the node (where the host's mounts are shared),
            # so a node does not keep another file system busy; its own mounts stay in it
            _run(_tool("unshare"), f"--mount={self.ns_file(node, 'mnt')}",
                 f"--uts={self.ns_file(node, 'uts')}", "--propagation", "slave", "true")
            binds = [(etc / "hosts", "/etc/hosts"), (self.node_dir(node) / "fstab", "/etc/fstab"),
                     (etc / "ssh_config", "/etc/ssh/ssh_config"),
                     *self._accounts(etc),
                     (self.node_dir(node) / "run", NODE_RUN),
                     # what the roles record about the node's disks is the node's own
                     (self.node_dir(node) / "state", NODE_STATE)]
            script = "; ".join(
                ["set -e", f"hostname {node.name}",
                 # POSIX shared memory of the node's own (MPI's segments name the host only)
                 "mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm"]
                + [f"mount --bind {shlex.quote(str(a))} {shlex.quote(str(b))}" for a, b in binds])
            _run(*self.on(node, "sh", "-c", script))

    def _accounts(self, etc: pathlib.Path) -> list[tuple[pathlib.Path, str]]:
        """The nodes' view of the service account, which the nightly's jobs run as: on a
        cluster's compute nodes the jobs' account has a shell and may log in with its key
        (inter-node staging over ssh), though on the login node it has none. /etc/passwd
        and /etc/shadow copies where it has /bin/sh and no locked password ('*': key login
        only), bound on each node; none without the account."""
        user = service_account()
        if user is None:
            return []
        views = []
        for name, field, value in (("passwd", 6, "/bin/sh"), ("shadow", 1, "*")):
            lines = []
            for line in pathlib.Path(f"/etc/{name}").read_text().splitlines():
                parts = line.split(":")
                if parts[0] == user.name:
                    parts[field] = value
                lines.append(":".join(parts))
            copy = etc / name
            copy.write_text("\n".join(lines) + "\n")
            copy.chmod(0o644 if name == "passwd" else 0o640)
            views.append((copy, f"/etc/{name}"))
        return views

    def _scratch(self) -> None:
        import yaml

        role_defaults = yaml.safe_load(
            (paths.REPO / "ansible/roles/nvme_scratch/defaults/main.yml").read_text())
        for node in self.nodes:
            image = self.node_dir(node) / "nvme.img"
            with open(image, "wb") as f:
                f.truncate(SCRATCH_IMAGE_BYTES)
            device = _run(_tool("losetup"), "-f", "--show", image).stdout.strip()
            drop_partitions(device)
            link = pathlib.Path(node.facts["nvme_scratch_devices"][0])
            target = self.node_dir(node) / "run" / link.relative_to(NODE_RUN)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(device)
            if self.blank_scratch:
                continue
            # the state the nvme_scratch role leaves: labelled XFS, mounted by UUID through
            # the node's fstab with the inventory's options, its job directories
            facts = node.facts
            _run(_tool("mkfs.xfs"), "-q", "-L", facts["nvme_scratch_label"], device)
            uuid = _run(_tool("blkid"), "-p", "-s", "UUID", "-o", "value", device).stdout.strip()
            mount = facts["nvme_scratch_mount"]
            with open(self.node_dir(node) / "fstab", "a") as f:
                f.write(f"UUID={uuid} {mount} xfs {facts['nvme_scratch_mount_opts']} 0 0\n")
            dirs = []
            for d in role_defaults["nvme_scratch_dirs"]:
                path = shlex.quote(f"{mount}/{d['path']}")
                dirs.append(f"mkdir -p {path} && chmod {d['mode']} {path}")
            _run(*self.on(node, "sh", "-c", " && ".join([f"mount {shlex.quote(mount)}", *dirs])))
            # nofail makes mount succeed when the UUID is not found (libblkid raced with
            # another user of loop devices): the node would run on its root file system
            if _run(*self.on(node, _tool("findmnt"), "-n", mount), check=False).returncode:
                raise ClusterError(f"{node.name}: UUID={uuid} ({device}) did not mount at {mount}")

    def _daemons(self) -> None:
        self.start_munged()
        self._spawn("slurmctld", [_tool("slurmctld"), "-D", "-i", "-f", str(self.conf)])
        sshd_config = self.state / "etc" / "sshd_config"
        for node in self.nodes:
            self._spawn(f"slurmd-{node.name}", self.on(node, "nice", "-n", str(NODE_NICE),
                                                       _tool("slurmd"), "-D", "-f", self.conf))
            self._spawn(f"sshd-{node.name}", self.on(
                node, _tool("sshd"), "-D", "-e", "-f", sshd_config,
                "-h", self.state / "ssh" / f"host_{node.name}",
                "-o", f"PidFile={self.state / 'run' / f'sshd-{node.name}.pid'}"))
        self._wait(f"all {len(self.nodes)} nodes idle (sinfo)", self._all_idle, list(self.procs))
        self._wait("sshd on every node (ssh true)", self._ssh_ok, list(self.procs))

    def node_states(self) -> dict[str, str]:
        p = subprocess.run([_tool("sinfo"), "-h", "-N", "-o", "%N %T"], capture_output=True,
                           text=True, env=dict(os.environ, **self.env()), timeout=15)
        return dict(line.split() for line in p.stdout.splitlines() if len(line.split()) == 2)

    def _all_idle(self) -> bool:
        states = self.node_states()
        return all(states.get(n.name) == "idle" for n in self.nodes)

    def ssh(self, node: str, command: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run a command on a node over the cluster's ssh, from the host."""
        return subprocess.run([_tool("ssh"), "-F", str(self.ssh_config), node, command],
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def _ssh_ok(self) -> bool:
        return all(self.ssh(n.name, "true", timeout=15).returncode == 0 for n in self.nodes)

    # down ----------------------------------------------------------------------------
    def stop(self) -> None:
        self.down()

    def _ns_ids(self) -> set[tuple[int, int]]:
        """(device, inode) of every namespace the cluster keeps in a file."""
        files = list(pathlib.Path("/run/netns").glob(f"{self.prefix}-*"))
        if self.ns_dir.is_dir():
            files += list(self.ns_dir.iterdir())
        # a file no namespace is bound to has an inode of the state's file system, which
        # no process's namespace has
        return {(st.st_dev, st.st_ino) for st in map(os.stat, files)}

    def _mounts_under_state(self) -> list[str]:
        listed = _run(_tool("findmnt"), "-J", "-l", "-o", "TARGET").stdout or "{}"
        points = [fs["target"] for fs in json.loads(listed).get("filesystems", [])]
        return [p for p in points if p == str(self.state) or p.startswith(f"{self.state}/")]

    def _is_mount(self, path: pathlib.Path) -> bool:
        return str(path) in self._mounts_under_state()

    def processes(self) -> list[int]:
        """Processes of the cluster: everything in its namespaces, and the host daemons it
        started (by their recorded pid, when that process still runs this cluster's
        config)."""
        ours = self._ns_ids()
        skip = {os.getpid()}
        found = set()
        for proc in pathlib.Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) in skip:
                continue
            try:
                ids = {(s.st_dev, s.st_ino) for s in (os.stat(proc / "ns" / "net"),
                                                      os.stat(proc / "ns" / "mnt"))}
            except OSError:
                continue
            if ids & ours:
                found.add(int(proc.name))
        for name in ("munged", "slurmctld"):
            pidfile = self.state / "run" / f"{name}.daemon-pid"
            try:
                pid = int(pidfile.read_text())
                cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
            except (OSError, ValueError):
                continue
            if str(self.state).encode() in cmdline:
                found.add(pid)
        return sorted(p for p in found if _alive(p))

    def _kill_all(self) -> None:
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            left = self.processes()
            for pid in left:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait
            while left and time.monotonic() < deadline:
                for proc in self.procs.values():
                    proc.poll()     # reap the ones this process started
                left = [p for p in left if _alive(p)]
                time.sleep(0.2)
            if not left:
                return

    def down(self, quiet: bool = False) -> list[str]:
        """Stop and remove everything the cluster made; return what could not be removed."""
        if not self.state.is_dir():
            return []
        if not quiet:
            print(f"iostack: stopping the cluster in {self.state}", flush=True)
        if self.record.is_file():
            self.partitions = list(json.loads(self.record.read_text()).get("partitions", {}))
        if self.conf.is_file() and self.partitions and self.processes():
            self.cancel_jobs(timeout=20)
        self._kill_all()
        self.procs.clear()
        umount = shutil.which("umount", path=SYSTEM_PATH) or "umount"
        # the scratch file systems, from inside each node that has one
        loops = set(self.loop_devices())
        for mnt in sorted(self.ns_dir.glob("*.mnt")) if self.ns_dir.is_dir() else []:
            if not self._is_mount(mnt):
                continue
            table = subprocess.run([_tool("nsenter"), f"--mount={mnt}", "findmnt", "-J", "-l",
                                    "-o", "SOURCE,TARGET"], capture_output=True, text=True,
                                   timeout=60).stdout
            for fs in json.loads(table or "{}").get("filesystems", []):
                if fs["source"] in loops:
                    subprocess.run([_tool("nsenter"), f"--mount={mnt}", umount, fs["target"]],
                                   capture_output=True, timeout=60)
        for point in sorted(self._mounts_under_state(), key=len, reverse=True):
            subprocess.run([umount, point], capture_output=True, timeout=60)
        ip = shutil.which("ip", path=SYSTEM_PATH) or "ip"
        for name in self._netns_names():
            subprocess.run([ip, "netns", "del", name], capture_output=True, timeout=30)
        for link in self._links():
            subprocess.run([ip, "link", "del", link], capture_output=True, timeout=30)
        for _ in range(25):
            devices = self.loop_devices()
            for dev in devices:
                subprocess.run([_tool("losetup"), "-d", dev], capture_output=True, timeout=30)
            if not self.loop_devices():
                break
            time.sleep(0.2)
        left = self.leftovers()
        if self.record.is_file():
            record = json.loads(self.record.read_text())
            record["status"] = "down" if not left else "down-with-leftovers"
            self.record.write_text(json.dumps(record, indent=1) + "\n")
        if not quiet:
            print("iostack: cluster stopped; nothing left" if not left else
                  "iostack: error: left behind:\n  " + "\n  ".join(left), flush=True)
        return left

    def _netns_names(self) -> list[str]:
        return sorted(p.name for p in pathlib.Path("/run/netns").glob(f"{self.prefix}-*"))

    def _links(self) -> list[str]:
        out = _run(shutil.which("ip", path=SYSTEM_PATH) or "ip", "-j", "link", "show",
                   check=False).stdout or "[]"
        return [link["ifname"] for link in json.loads(out)
                if link["ifname"].startswith(self.prefix)]

    def loop_devices(self) -> list[str]:
        out = _run(_tool("losetup"), "-J", "-l", "-O", "NAME,BACK-FILE", check=False).stdout
        devices = json.loads(out).get("loopdevices", []) if out.strip() else []
        return [d["name"] for d in devices
                if (d.get("back-file") or "").startswith(f"{self.state}/")]

    def leftovers(self) -> list[str]:
        """What of the cluster still exists on this host."""
        return ([f"network namespace {n}" for n in self._netns_names()]
                + [f"link {n}" for n in self._links()]
                + [f"loop device {d}" for d in self.loop_devices()]
                + [f"mount {m}" for m in self._mounts_under_state()]
                + [f"process {p} ({_comm(p)})" for p in self.processes()])

    # status --------------------------------------------------------------------------
    def status(self) -> str:
        if not self.record.is_file():
            return f"no cluster in {self.state}"
        record = json.loads(self.record.read_text())
        lines = [f"cluster in {self.state}: {record['status']}, bridge {record['bridge']} "
                 f"{record['subnet']}, controller {record['controller']['name']} "
                 f"{record['controller']['address']}:{record['controller']['port']}"]
        states = self.node_states() if record["status"] == "up" else {}
        for n in record["nodes"]:
            lines.append(f"  {n['name']:8s} {n['address']:15s} {n['partition']:14s} "
                         f"{states.get(n['name'], '-')}")
        return "\n".join(lines)


def _alive(pid: int) -> bool:
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _comm(pid: int) -> str:
    try:
        return pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def default_state_dir() -> pathlib.Path:
    return Settings.from_environ(os.environ).deploy_root("local") / "cluster"


def add_arguments(p: argparse.ArgumentParser) -> None:
    # reboot-node: slurmd runs it (RebootProgram), not a user
    p.add_argument("action", choices=["up", "down", "status", "env", "reboot-node"])
    p.add_argument("--state-dir", type=pathlib.Path,
                   help="where the cluster keeps everything (default: <deploy root of local>/cluster)")
    p.add_argument("--blank-scratch", action="store_true",
                   help="up: leave each node's NVMe unformatted (for the nvme_scratch role)")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="up: seconds to wait for the daemons (default 120)")


def run(args) -> int:
    """`iostack-testbed cluster up|down|status|env`."""
    cluster = LocalCluster(args.state_dir or default_state_dir(), timeout=args.timeout,
                           blank_scratch=args.blank_scratch)
    if args.action == "up":
        print(f"iostack-testbed: starting the cluster in {cluster.state} from "
              f"{cluster.inventory_dir}", flush=True)
        cluster.start()
        cluster.procs.clear()   # the daemons outlive this command; `down` finds them
        print(cluster.status())
        print(exports(cluster.env()), end="")
    elif args.action == "down":
        return 1 if cluster.down() else 0
    elif args.action == "reboot-node":
        return reboot_node(cluster.state)
    elif args.action == "status":
        print(cluster.status())
    else:
        if not cluster.is_up():
            raise ClusterError(f"no cluster is up in {cluster.state}")
        print(exports(cluster.env()), end="")
    return 0


def exports(env: dict[str, str]) -> str:
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
