"""The multi-node cluster's pure parts: its slurm.conf (several slurmds, one state
directory), its choice of subnet, and the emulated sysfs of NPS2 nodes."""
import ipaddress

from iostack_testbed import cluster, slurm
from iostack_rfm.jobs import nodestate

from ansible_helpers import make_sysfs  # noqa: E402

HARDWARE = {"NodeName": "vm", "CPUs": "2", "Boards": "1", "SocketsPerBoard": "1",
            "CoresPerSocket": "2", "ThreadsPerCore": "1", "RealMemory": "24105"}


def cluster_conf(tmp_path):
    return slurm.cluster_conf(
        tmp_path, tmp_path / "munge/munge.socket", controller="vm(10.214.7.1)",
        ctld_port=7001, slurmd_port=6818,
        nodes=[slurm.node_line(HARDWARE, f"node{i}", f"10.214.7.1{i}") for i in (1, 2, 3)],
        partitions={"compute-nps1": ["node1", "node2"], "compute-nps2": ["node3"]},
        per_node=True, extra=("SlurmdParameters=config_overrides",))


def test_every_slurmd_has_its_own_spool_pid_and_log(tmp_path):
    keys = dict(line.split("=", 1) for line in cluster_conf(tmp_path).splitlines()
                if "=" in line and not line.startswith(("#", "NodeName", "PartitionName")))
    assert keys["SlurmdSpoolDir"] == f"{tmp_path}/spool/%n"
    assert keys["SlurmdPidFile"] == f"{tmp_path}/run/slurmd-%n.pid"
    assert keys["SlurmdLogFile"] == f"{tmp_path}/log/slurmd-%n.log"
    assert keys["SlurmctldHost"] == "vm(10.214.7.1)"
    assert keys["SlurmdParameters"] == "config_overrides"


def test_nodes_and_partitions(tmp_path):
    lines = cluster_conf(tmp_path).splitlines()
    nodes = [line for line in lines if line.startswith("NodeName=")]
    assert nodes[1] == ("NodeName=node2 CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 "
                        "ThreadsPerCore=1 RealMemory=24105 NodeAddr=10.214.7.12 State=UNKNOWN")
    parts = [line for line in lines if line.startswith("PartitionName=")]
    assert parts == ["PartitionName=compute-nps1 Nodes=node1,node2 Default=YES MaxTime=INFINITE State=UP",
                     "PartitionName=compute-nps2 Nodes=node3 MaxTime=INFINITE State=UP"]


def test_subnet_avoids_every_network_in_use():
    tag = "000001"
    first = cluster.pick_subnet(tag, [])
    assert first == ipaddress.ip_network("10.214.2.0/24")
    taken = [ipaddress.ip_network("10.214.2.5/32"), ipaddress.ip_network("10.214.0.0/23"),
             ipaddress.ip_network("10.214.3.0/24")]
    assert cluster.pick_subnet(tag, taken) == ipaddress.ip_network("10.214.4.0/24")


def test_emulated_nps2_splits_each_socket_and_keeps_smt(tmp_path):
    real = make_sysfs(tmp_path / "real", sockets=2, numa_nodes=2, cpus_per_socket=4,
                      smt_control="notsupported", smt_active="0")
    cluster.emulated_sysfs(tmp_path / "nps2", 2, real=real)
    layout = nodestate.numa_layout(tmp_path / "nps2")
    assert layout == {"numa_nodes": 4, "sockets": 2, "smt_control": "notsupported",
                      "smt_active": "0"}
    node = tmp_path / "nps2/devices/system/node"
    assert [(node / f"node{i}/cpulist").read_text().strip() for i in range(4)] == \
        ["0,1", "2,3", "4,5", "6,7"]
    # what the check compares: sockets x NPS NUMA nodes
    assert nodestate.mismatches("n", {"bios_nps": 2}, {**layout, "hugepages_total": 0}) == []
    assert nodestate.mismatches("n", {"bios_nps": 1}, {**layout, "hugepages_total": 0}) == [
        "n: NUMA nodes (sockets x NPS): inventory says 2, node has 4"]
