"""Ansible over ssh against the multi-node cluster's nodes, with the local-cluster
inventory: smt, hugepages and nvme_scratch in check mode on every node, then nvme_scratch
applied to each node's own blank loop device, a re-run that changes nothing, and the
per-node hardware comparison finding each node as the inventory describes it. Needs root."""
import json
import pathlib

import pytest
from cluster_fixtures import leftovers, run

from iostack_testbed import cluster as harness
from iostack.site import inventory
from iostack_rfm.jobs import nodestate

from ansible_helpers import ANSIBLE_DIR, FIXTURES, ansible_env  # noqa: E402

pytestmark = [pytest.mark.skipif(harness.unavailable_reason() is not None,
                                 reason=harness.unavailable_reason() or ""),
              pytest.mark.usefixtures("loop_devices")]
INVENTORY = ANSIBLE_DIR / "inventories" / "local-cluster"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Nodes fresh from the factory: their NVMe holds nothing."""
    c = harness.LocalCluster(tmp_path_factory.mktemp("cla"), blank_scratch=True)
    c.start()
    yield c
    assert c.down(quiet=True) == []
    assert leftovers(c.state, c.prefix) == []


def playbook(cluster, venv_bin, roles, check=False):
    """ansible-playbook over the cluster's ssh; (rc, stats by host, messages, stderr)."""
    args = [venv_bin / "ansible-playbook", "-i", INVENTORY, FIXTURES / "node_roles.yml",
            "-e", json.dumps({"node_roles": roles})] + (["--check"] if check else [])
    p = run(*args, env={**ansible_env(venv_bin), **cluster.env()})
    data = json.loads(p.stdout) if p.stdout.startswith("{") else {}
    messages = []
    for play in data.get("plays", []):
        for task in play["tasks"]:
            for host, res in task["hosts"].items():
                msg = res.get("msg")
                messages += [f"{host}: {m}" for m in (msg if isinstance(msg, list) else [msg])
                             if m is not None]
    return p.returncode, data.get("stats", {}), "\n".join(messages), p.stderr


def devices(cluster):
    return {n.name: (cluster.node_dir(n) / "run/dev/nvme0n1").resolve() for n in cluster.nodes}


def test_check_mode_plans_all_three_roles_on_every_node_and_changes_nothing(cluster, venv_bin):
    host_fstab = pathlib.Path("/etc/fstab").read_bytes()
    rc, stats, messages, err = playbook(cluster, venv_bin, ["smt", "hugepages", "nvme_scratch"],
                                        check=True)
    assert rc == 0, messages + err
    assert sorted(stats) == ["node1", "node2", "node3", "node4", "node5"]
    assert all(s["failures"] == 0 and s["unreachable"] == 0 for s in stats.values()), stats
    for node, dev in devices(cluster).items():
        assert f"{node}: /run/iostack-node/dev/nvme0n1 ({dev}): fresh" in messages
        assert f"{node}: xfs label iostack-scr on {dev}" in messages
        # node5 was booted with SMT on (its emulated sysfs): wanted on, as it is
        assert f"{node}: smt: wanted {'on' if node == 'node5' else 'off'};" in messages
        # nothing was written to the device
        assert run("blkid", "-p", dev).stdout == ""
    assert "vm.nr_hugepages=0" in messages
    assert pathlib.Path("/etc/fstab").read_bytes() == host_fstab


HOST_RECORD = pathlib.Path("/var/lib/iostack/nvme_scratch.json")


def test_nvme_scratch_applies_to_each_nodes_own_device_then_changes_nothing(cluster, venv_bin):
    host_fstab = pathlib.Path("/etc/fstab").read_bytes()
    host_record = HOST_RECORD.read_bytes() if HOST_RECORD.exists() else None
    rc, stats, messages, err = playbook(cluster, venv_bin, ["nvme_scratch"])
    assert rc == 0, messages + err
    assert all(s["changed"] > 0 for s in stats.values()), stats
    for node, dev in devices(cluster).items():
        seen = cluster.ssh(node, "findmnt -n -o SOURCE,FSTYPE /mnt/localdisk; cat /etc/fstab")
        assert seen.stdout.splitlines()[0].split() == [str(dev), "xfs"]
        uuid = run("blkid", "-p", "-s", "UUID", "-o", "value", dev).stdout.strip()
        assert f"UUID={uuid} /mnt/localdisk xfs " in seen.stdout
        record = json.loads(cluster.ssh(node, "cat /var/lib/iostack/nvme_scratch.json").stdout)
        assert record["filesystems"] == {"/mnt/localdisk": uuid}
    assert pathlib.Path("/etc/fstab").read_bytes() == host_fstab   # each node wrote its own
    assert not HOST_RECORD.exists() or HOST_RECORD.read_bytes() == host_record

    rc, stats, messages, err = playbook(cluster, venv_bin, ["nvme_scratch"])
    assert rc == 0, messages + err
    assert {h: s["changed"] for h, s in stats.items()} == {n.name: 0 for n in cluster.nodes}


def test_each_node_is_as_the_inventory_says(cluster):
    """What the hardware check compares, on the nodes the role configured."""
    inv = inventory.load(INVENTORY)
    facts = {h: inventory.hostvars(inv, h) for h in inventory.hosts(inv, "compute")}
    facts_file = cluster.state / "facts.json"
    facts_file.write_text(json.dumps(facts))
    rfm = pathlib.Path(__file__).resolve().parents[2] / "reframe-tests"
    for node in facts:
        p = cluster.ssh(node, f"PYTHONPATH={rfm} python3 -m iostack_rfm.jobs.nodestate hardware "
                              f"{facts_file}")
        assert p.returncode == 0, p.stderr
        (record,) = nodestate.parse(p.stdout)
        assert record["host"] == node
        assert nodestate.mismatches(node, facts[node], record["found"]) == []
