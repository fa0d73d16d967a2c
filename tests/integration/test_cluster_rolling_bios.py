"""A BIOS change on a live partition, on the multi-node cluster (`LocalCluster`): firmware.yml
with `bios_reboot_via: slurm` takes the nodes one batch at a time; Slurm drains each node
(`scontrol reboot ASAP nextstate=RESUME reason=...`), lets its job end, runs the cluster's
RebootProgram, and puts it back in service; the role checks the new setting on the BMC and
in the node's sysfs before the next batch. A job on a node outside the change keeps running
through all of it.

Each node has a BMC of its own (ansible_fixtures/redfish_mock.py, which keeps a write
pending until the system resets) on the cluster's bridge, reachable from the host (Ansible's
Redfish calls) and from the node. A node's "reboot" here is tools/testbed/iostack_testbed/cluster.py's
reboot_node: its reboot.d hook (ansible_fixtures/bmc_boot_hook.py) resets the BMC, which
applies the pending settings, and renders the node's emulated sysfs from them; then slurmd
restarts with a new boot time. Needs root."""
from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
import threading
import time

import pytest
import yaml
from ansible_helpers import ANSIBLE_DIR, FIXTURES, ansible_env, free_port, make_cert
from cluster_fixtures import leftovers, run

from iostack_testbed import cluster as harness

pytestmark = [pytest.mark.skipif(harness.unavailable_reason() is not None,
                                 reason=harness.unavailable_reason() or ""),
              pytest.mark.usefixtures("loop_devices")]

BMC_USER, BMC_PASSWORD = "bmc-admin", "s3cret-bmc-pw"
CHANGED = ["node2", "node3"]      # the nodes the change is for, one per batch
BUSY = "node1"                    # runs a job through the whole change
# a counter, one line every 0.2 s: a restarted job would start again from 0
COUNTER = "i=0; while :; do echo $i; i=$((i+1)); sleep 0.2; done"
NOT_IN_SERVICE = re.compile(r"drain|reboot|down|boot|maint", re.I)


def inventory(tmp_path: pathlib.Path) -> pathlib.Path:
    """ansible/inventories/local-cluster, with every node's NUMA layout emulated (so a
    reboot can change it) and a Redfish BMC per node; runtime SMT is left alone (the nodes
    share this machine's kernel)."""
    data = yaml.safe_load((ANSIBLE_DIR / "inventories/local-cluster/hosts.yml").read_text())
    compute = data["all"]["children"]["compute"]
    compute["vars"].update(bios_sysfs_root="/run/iostack-node/sys", smt_enabled=None)
    inv = tmp_path / "inventory"
    inv.mkdir()
    (inv / "hosts.yml").write_text(yaml.safe_dump(data))
    return inv


class Bmcs:
    """One redfish_mock.py per node on the cluster's bridge address."""

    def __init__(self, cluster, directory: pathlib.Path):
        self.address = cluster.bridge_address
        self.cert, self.key = make_cert(directory, self.address)
        self.procs, self.ports = {}, {}
        for node in cluster.nodes:
            port = free_port()
            nps = str(node.nps)
            self.procs[node.name] = subprocess.Popen(
                [sys.executable, str(FIXTURES / "redfish_mock.py"), "--address", self.address,
                 "--port", str(port), "--cert", str(self.cert), "--key", str(self.key),
                 "--user", BMC_USER, "--password", BMC_PASSWORD, "--attributes",
                 json.dumps({"LogicalProc": "Enabled", "NumaNodesPerSocket": nps})],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.ports[node.name] = port
        for name in self.procs:
            deadline = time.monotonic() + 30
            while self.state(name) is None:
                assert time.monotonic() < deadline, f"BMC of {name} did not answer"
                time.sleep(0.2)

    def url(self, node: str) -> str:
        return f"https://{self.address}:{self.ports[node]}"

    def state(self, node: str) -> dict | None:
        p = run("curl", "-sS", "--cacert", self.cert, f"{self.url(node)}/mock/state")
        return json.loads(p.stdout) if p.returncode == 0 and p.stdout.startswith("{") else None

    def host_vars(self, node: str) -> dict:
        return {"bios_method": "redfish", "bios_bmc_address": f"{self.address}:{self.ports[node]}",
                "bios_bmc_username": BMC_USER, "bios_bmc_password": BMC_PASSWORD,
                "bios_bmc_ca_path": str(self.cert)}

    def stop(self):
        for proc in self.procs.values():
            proc.terminate()
            proc.wait(timeout=10)


class Watch(threading.Thread):
    """squeue and sinfo every 0.25 s while the play runs: the job's state and node, and
    each node's Slurm state."""

    def __init__(self, cluster, job: str):
        super().__init__(daemon=True)
        self.env, self.job = cluster.env(), job
        self.samples: list[tuple[dict, dict]] = []
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            job = run("squeue", "-h", "-j", self.job, "-o", "%i %T %N", env=self.env).stdout.split()
            nodes = dict(line.split() for line in run(
                "sinfo", "-h", "-N", "-o", "%N %T", env=self.env).stdout.splitlines()
                if len(line.split()) == 2)
            # (no job line: the job is gone, which the test reports)
            self.samples.append((dict(zip(("id", "state", "node"), job, strict=False)), nodes))
            time.sleep(0.25)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rolling")
    c = harness.LocalCluster(tmp / "state", inventory_dir=inventory(tmp))
    c.start()
    yield c
    assert c.down(quiet=True) == []
    assert leftovers(c.state, c.prefix) == []


def test_a_bios_change_in_batches_leaves_a_running_job_untouched(cluster, venv_bin, tmp_path):
    bmcs = Bmcs(cluster, tmp_path)
    try:
        # each node's firmware at boot: its BMC applies what is pending (reboot.d hook)
        for node in cluster.nodes:
            config = cluster.node_dir(node) / "run" / "bmc.json"
            config.write_text(json.dumps({"url": bmcs.url(node.name), "user": BMC_USER,
                                          "password": BMC_PASSWORD, "ca": str(bmcs.cert),
                                          "sysfs": "/run/iostack-node/sys"}))
            hook = cluster.node_dir(node) / "run" / "reboot.d" / "10-bios"
            hook.parent.mkdir()
            hook.write_text(f"#!/bin/sh\nexec {sys.executable} {FIXTURES / 'bmc_boot_hook.py'} "
                            "/run/iostack-node/bmc.json\n")
            hook.chmod(0o755)
        host_vars = {n.name: bmcs.host_vars(n.name) for n in cluster.nodes}
        inv = pathlib.Path(cluster.inventory_dir) / "host_vars"
        inv.mkdir()
        for node, hv in host_vars.items():
            (inv / f"{node}.yml").write_text(yaml.safe_dump(hv))

        env = cluster.env()
        out = tmp_path / "counter.out"
        busy = run("sbatch", "--parsable", "-w", BUSY, "-p", "nps1", "-o", out,
                   "--wrap", COUNTER, env=env).stdout.strip()
        # node2 has a job too: the drain lets it end before the reboot (ASAP)
        short = run("sbatch", "--parsable", "-w", "node2", "-p", "nps1",
                    "-o", tmp_path / "short.out", "--wrap", "sleep 5; echo finished",
                    env=env).stdout.strip()
        deadline = time.monotonic() + 60
        while run("squeue", "-h", "-j", f"{busy},{short}", "-t", "R", "-o", "%i",
                  env=env).stdout.split() != sorted([busy, short], key=int):
            assert time.monotonic() < deadline, "the jobs did not start"
            time.sleep(0.5)
        # RUNNING comes before slurmd has opened the job's output (a loaded node: seconds)
        while not (out.is_file() and out.read_text().split()):
            assert time.monotonic() < deadline, "the busy job wrote nothing"
            time.sleep(0.2)
        before = [int(x) for x in out.read_text().split()]

        watch = Watch(cluster, busy)
        watch.start()
        args = [venv_bin / "ansible-playbook", "-i", cluster.inventory_dir,
                ANSIBLE_DIR / "firmware.yml", "--limit", ",".join(CHANGED),
                "-e", json.dumps({"firmware_batch": 1, "bios_nps": 2, "bios_smt": False,
                                  "bios_reboot_via": "slurm", "bios_slurm_delegate": "localhost",
                                  "bios_slurm_poll": 1, "bios_slurm_reboot_timeout": 300,
                                  "bios_verify_retries": 0, "bios_verify_delay": 0})]
        play = run(*args, env={**ansible_env(venv_bin), **env}, timeout=1200)
        watch.done.set()
        watch.join()
        data = json.loads(play.stdout) if play.stdout.startswith("{") else {}
        assert play.returncode == 0, play.stdout[-4000:] + play.stderr[-3000:]
        assert {h: s["failures"] for h, s in data["stats"].items()} == {n: 0 for n in CHANGED}

        # the busy job: the same job, RUNNING on node1 at every look, its counter unbroken
        jobs = {(s["id"], s["state"], s["node"]) for s, _ in watch.samples}
        assert jobs == {(busy, "RUNNING", BUSY)}, jobs
        after = [int(x) for x in out.read_text().split()]
        assert after == list(range(len(after))) and len(after) > len(before)
        assert after[:len(before)] == before
        # the short job on node2 ran to its end (a killed one prints nothing) before the reboot
        assert (tmp_path / "short.out").read_text() == "finished\n"

        # one batch at a time: never two nodes out of service at once; node2 back in
        # service before node3 left it; node1 and node4 in service throughout
        out_of_service = [[n for n, st in nodes.items() if NOT_IN_SERVICE.search(st)]
                          for _, nodes in watch.samples]
        assert max(len(o) for o in out_of_service) == 1, out_of_service
        node2_out = [i for i, o in enumerate(out_of_service) if "node2" in o]
        node3_out = [i for i, o in enumerate(out_of_service) if "node3" in o]
        assert node2_out and node3_out and max(node2_out) < min(node3_out)
        assert not any({BUSY, "node4"} & set(o) for o in out_of_service)
        log = (cluster.state / "log" / "slurmctld.log").read_text()
        order = [m.group(0) for m in re.finditer(
            r"reboot request queued for nodes node[23]|node node[23] returned to service", log)]
        assert order == ["reboot request queued for nodes node2", "node node2 returned to service",
                         "reboot request queued for nodes node3", "node node3 returned to service"]

        # the setting applied: current on the changed nodes' BMCs (one reset each) and in
        # their sysfs; the other nodes' BMCs never written to
        for name in CHANGED:
            st = bmcs.state(name)
            assert st["current"] == {"LogicalProc": "Disabled", "NumaNodesPerSocket": "2"}
            assert (st["pending"], st["patches"], st["resets"]) == ({}, 1, 1)
            seen = cluster.ssh(name, "ls -d /run/iostack-node/sys/devices/system/node/node* | wc -l;"
                                     " cat /run/iostack-node/sys/devices/system/cpu/smt/control")
            packages = len({p.read_text() for p in pathlib.Path("/sys/devices/system/cpu").glob(
                "cpu[0-9]*/topology/physical_package_id")})
            assert seen.stdout.split() == [str(2 * packages), "notsupported"]
        for name in (BUSY, "node4"):
            st = bmcs.state(name)
            assert (st["patches"], st["resets"], st["requests"]) == (0, 0, 0)
        msgs = play.stdout
        for name in CHANGED:
            assert f"bios: {name} rebooted through Slurm and back in service: IDLE" in msgs
    finally:
        bmcs.stop()
        run("scancel", "--partition", "nps1,nps2", env=cluster.env())
