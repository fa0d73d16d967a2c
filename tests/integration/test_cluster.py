"""The multi-node cluster for real (`iostack-testbed cluster`, tools/testbed/iostack_testbed/cluster.py): the
nodes of ansible/inventories/local-cluster as namespaces of this machine, each with its
own slurmd, sshd and XFS scratch. The short forms of what the nightly runs on it: an MPI
job over three nodes, PMIx fences that span them, [OCI-OpenFOAM]'s seven staging
steps on a coarse motorBike for 10 iterations, and the per-node hardware check with one
node drifted. Then `down`, and a
killed `up`, leave nothing behind. Needs root."""
import os
import pathlib
import re
import shutil
import signal
import subprocess
import time

import pytest
from cluster_fixtures import (HELLO, IOSTACK, TESTBED, last_attempts, leftovers, nightly, run,
                              running_cluster)

from iostack_testbed import cluster as harness

pytestmark = [pytest.mark.skipif(harness.unavailable_reason() is not None,
                                 reason=harness.unavailable_reason() or ""),
              pytest.mark.usefixtures("loop_devices")]



@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory, "cl") as c:
        yield c


def nodes(cluster):
    return [n.name for n in cluster.nodes]


def test_every_node_of_the_inventory_is_idle_in_its_partition(cluster):
    p = run("sinfo", "-h", "-N", "-o", "%N %P %T", env=cluster.env())
    assert sorted(p.stdout.split("\n")[:-1]) == [
        "node1 nps1* idle", "node2 nps1* idle", "node3 nps1* idle",
        "node4 nps2 idle", "node5 smt idle"]


def test_each_node_has_its_own_name_address_and_scratch(cluster):
    seen = {}
    for node in cluster.nodes:
        p = cluster.ssh(node.name, "hostname; ip -4 -o addr show eth0; "
                        "findmnt -n -o SOURCE,FSTYPE /mnt/localdisk; "
                        "readlink -f /run/iostack-node/dev/nvme0n1; cat /etc/fstab")
        assert p.returncode == 0, p.stderr
        lines = p.stdout.splitlines()
        assert lines[0] == node.name
        assert f" {node.address}/24 " in lines[1]
        source, fstype = lines[2].split()
        assert (source, fstype) == (lines[3], "xfs")
        uuid = run("blkid", "-p", "-s", "UUID", "-o", "value", source).stdout.strip()
        assert f"UUID={uuid} /mnt/localdisk xfs defaults,noatime" in p.stdout
        seen[node.name] = source
    assert len(set(seen.values())) == len(seen)     # every node its own device
    # mounted in the nodes only: the host's mount table has none of them
    mounts = pathlib.Path("/proc/self/mounts").read_text()
    assert not any(dev + " " in mounts for dev in seen.values())
    # the nodes reach each other by name, over their own sshd
    p = cluster.ssh("node1", "ssh node3 hostname")
    assert p.stdout.strip() == "node3", p.stderr
    # POSIX shared memory is the node's own too
    cluster.ssh("node1", "echo node1 > /dev/shm/iostack-cluster-test")
    assert cluster.ssh("node1", "cat /dev/shm/iostack-cluster-test").stdout == "node1\n"
    assert cluster.ssh("node2", "ls /dev/shm").stdout == ""
    assert not pathlib.Path("/dev/shm/iostack-cluster-test").exists()


def test_srun_starts_mpi_ranks_on_three_nodes_over_tcp(cluster, tmp_path):
    if not shutil.which("mpicc"):
        pytest.skip("no mpicc (libopenmpi-dev)")
    (tmp_path / "hello.c").write_text(HELLO)
    subprocess.run(["mpicc", "-o", str(tmp_path / "hello"), str(tmp_path / "hello.c")], check=True)
    veths = [n.veth for n in cluster.nodes[:3]]

    def received_by_host_side(dev):   # bytes the node sent into the bridge
        return int(pathlib.Path(f"/sys/class/net/{dev}/statistics/rx_bytes").read_text())

    before = [received_by_host_side(v) for v in veths]
    p = run("srun", "-p", "nps1", "-N", "3", "--ntasks-per-node=2", "--mpi=pmix",
            tmp_path / "hello", env={**cluster.env(), "OMPI_MCA_btl": "self,tcp"}, timeout=300)
    assert p.returncode == 0, p.stderr
    ranks = sorted(tuple(m.groups()) for m in re.finditer(
        r"^rank (\d+) of (\d+) on (\S+) sum (\d+) received (\w+)$", p.stdout, re.M))
    assert ranks == [(str(r), "6", f"node{r // 2 + 1}", "15", "ok") for r in range(6)]
    # each node sent its two ranks' MiB to the next node through its veth
    sent = [received_by_host_side(v) - b for v, b in zip(veths, before, strict=True)]
    assert all(s >= 2 << 20 for s in sent), sent


#: a PMIx client through four fences, with data and without by turns, each with another
#: rank (of another node) 2 s late into it: when each rank entered each fence and left it
FENCES = r"""
#include <pmix.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
int main(void) {
    pmix_proc_t me;
    if (PMIx_Init(&me, NULL, 0) != PMIX_SUCCESS) return 2;
    for (int f = 0; f < 4; f++) {
        bool collect = f % 2 == 0;
        pmix_value_t v;
        pmix_info_t info;
        if (me.rank == (unsigned)(f * 2 + 1) % 6) sleep(2);
        PMIX_VALUE_LOAD(&v, &f, PMIX_INT);
        PMIx_Put(PMIX_GLOBAL, "iostack.fence", &v);
        PMIx_Commit();
        PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
        double in = now();
        pmix_status_t rc = PMIx_Fence(NULL, 0, &info, 1);
        printf("fence %d data %d rank %u in %.6f out %.6f rc %d\n", f, collect, me.rank, in,
               now(), rc);
    }
    PMIx_Finalize(NULL, 0);
    return 0;
}
"""


def test_no_rank_leaves_a_fence_before_the_last_rank_enters_it(cluster, tmp_path):
    """Both kinds of PMIx fence span the job's nodes. With Slurm 22.05's tree fences (its
    choice for fences without data, and for all without direct connections) every fence
    here ended on its own node: the other nodes' ranks left 2 s before the late rank came
    in, and Open MPI's MPI_Init let ranks send to a peer not ready for them (slurm.py's
    mpi.conf). One clock for every node, so the bound is exact."""
    cflags = subprocess.run(["pkg-config", "--cflags", "--libs", "pmix"], capture_output=True,
                            text=True)
    if cflags.returncode:
        pytest.skip("no pmix.pc (libpmix-dev)")
    (tmp_path / "fences.c").write_text(FENCES)
    subprocess.run(["cc", "-o", str(tmp_path / "fences"), str(tmp_path / "fences.c"),
                    *cflags.stdout.split()], check=True)
    p = run("srun", "-p", "nps1", "-N", "3", "--ntasks-per-node=2", "--mpi=pmix",
            tmp_path / "fences", env=cluster.env(), timeout=300)
    assert p.returncode == 0, p.stderr
    rows = [m.groups() for m in re.finditer(
        r"^fence (\d) data (\d) rank (\d) in ([\d.]+) out ([\d.]+) rc (-?\d+)$", p.stdout, re.M)]
    assert sorted((f, data, rank, rc) for f, data, rank, _, _, rc in rows) == \
        [(str(f), str(1 - f % 2), str(r), "0") for f in range(4) for r in range(6)]
    for f in "0123":
        fence = [(float(t_in), float(t_out), rank) for g, _, rank, t_in, t_out, _ in rows if g == f]
        last_in = max(t_in for t_in, _, _ in fence)
        early = [rank for _, t_out, rank in fence if t_out < last_in]
        assert early == [], f"fence {f}: ranks {early} left before the last rank came in"


def test_seven_staging_steps_through_sbatch_short(cluster, tmp_path, capsys):
    """The check's seven six-rank MPI steps through sbatch, passing at the first attempt.
    Before every fence was a ring (slurm.py's mpi.conf), a rank could leave MPI_Init while
    a slower node's rank had no PML yet, which died of SIGSEGV: a fresh run lost all three
    attempts so."""
    p, report = nightly(cluster, tmp_path, "-n", "MotorBikeStagingCheck",
                        "-S", "surface_level=3", "-S", "background_cells=10,4,4",
                        "-S", "end_time=10", "--max-retries", "0")
    cases = last_attempts(report)
    by_partition = {tc["partition"]: tc for tc in cases.values()}
    assert by_partition["nps1"]["result"] == "pass", by_partition["nps1"]["fail_reason"]
    assert by_partition["nps2"]["result"] == "skip"     # one node there
    assert p.returncode == 0
    tc = by_partition["nps1"]
    script = (pathlib.Path(tc["stagedir"] if os.path.isdir(tc["stagedir"]) else
                           tc["outputdir"]) / "rfm_job.sh").read_text()
    assert "#SBATCH --partition=nps1" in script
    assert "nvme-stage fan-out --own-ranks" in script and "nvme-stage collect" in script
    # the local cluster binds as ARCHER2 does (one task per core, blocks), PMIx for MPI
    assert "srun --hint=nomultithread --distribution=block:block --mpi=pmix simpleFoam -parallel" \
        in script
    output = (pathlib.Path(tc["outputdir"]) / "rfm_job.out").read_text()
    # both runs' solver logs are kept, each under its own name
    kept = {p.name for p in pathlib.Path(tc["outputdir"]).glob("*.log.*")}
    assert {"case.log.simpleFoam", "shared-run.log.simpleFoam"} <= kept, kept
    # fan-out and collect went over the cluster's ssh to the other nodes
    assert re.search(r"rsync .*--rsh=ssh .*node2:/mnt/localdisk/", output)
    assert re.search(r"rsync .*--rsh=ssh node3:/mnt/localdisk/", output)
    values = {k.split(":")[-1]: v[0] for k, v in tc["perfvalues"].items()}
    steps = ["stage_in", "decompose", "fan_out", "potential", "solve", "collect", "stage_out"]
    assert all(values[f"seconds_{s}"] > 0 for s in steps)
    assert values["seconds_total"] == pytest.approx(sum(values[f"seconds_{s}"] for s in steps))
    # every node removed its copy
    for node in nodes(cluster)[:3]:
        assert cluster.ssh(node, "ls /mnt/localdisk/stage/iostack-rfm").stdout.strip() == ""
    with capsys.disabled():
        print("\n  staging (s): " + ", ".join(f"{s} {values[f'seconds_{s}']:.2f}" for s in steps)
              + f"; NVMe {values['seconds_total']:.1f} vs shared "
              f"{values['seconds_total_shared']:.1f} ({values['nvme_against_shared']:+.1%}, "
              "[OCI-OpenFOAM]: -26.2%)", end="")


def test_distributed_hardware_check_names_the_drifted_node(cluster, tmp_path):
    # node2's scratch loses noatime: a real mount option, in node2's namespace only
    drift = cluster.ssh("node2", "mount --options-mode ignore -o remount,relatime /mnt/localdisk")
    assert drift.returncode == 0, drift.stderr
    try:
        p, report = nightly(cluster, tmp_path, "-n", "NodeHardwareCheck", "--distribute=all")
    finally:
        cluster.ssh("node2", "mount --options-mode ignore -o remount,noatime /mnt/localdisk")
    results = {tc["display_name"].split("%.nid=")[1].split()[0]: tc
               for tc in last_attempts(report).values()}
    assert sorted(results) == nodes(cluster)
    assert {n: tc["result"] for n, tc in results.items()} == {
        "node1": "pass", "node2": "fail", "node3": "pass", "node4": "pass", "node5": "pass"}
    assert "node2: /mnt/localdisk is mounted without noatime" in results["node2"]["fail_reason"]
    assert p.returncode != 0


def test_the_nightlys_health_gate_drains_a_drifted_node_from_its_performance_checks(
        cluster, tmp_path):
    """The nightly's health gate (iostack.regression.nightly): the hardware check on every node
    first; node2, its scratch without noatime, is named in one line and kept from the
    performance check's job (--exclude), while the correctness check's job may still use it."""
    drift = cluster.ssh("node2", "mount --options-mode ignore -o remount,relatime /mnt/localdisk")
    assert drift.returncode == 0, drift.stderr
    try:
        p, report = nightly(cluster, tmp_path, "--system", "local-cluster:nps1",
                            "-n", "OpenFOAMPitzDailyCheck", "-n", "BindingCheck")
    finally:
        cluster.ssh("node2", "mount --options-mode ignore -o remount,noatime /mnt/localdisk")
    assert re.search(r"^iostack: node2 is drained from the performance checks: /mnt/localdisk "
                     r"is mounted without noatime", p.stdout, re.M), p.stdout[-3000:]
    assert not re.search(r"node[13] is drained", p.stdout)
    assert p.returncode != 0        # the gate's failure is the run's
    scripts = {}
    for tc in last_attempts(report).values():
        where = tc["stagedir"] if os.path.isdir(tc["stagedir"]) else tc["outputdir"]
        scripts[tc["display_name"].split()[0]] = (pathlib.Path(where) / "rfm_job.sh").read_text()
    assert "#SBATCH --exclude=node2" in scripts["OpenFOAMPitzDailyCheck"]
    assert "--exclude" not in scripts["BindingCheck"]
    # the hardware check ran once, in the gate's own session
    assert "NodeHardwareCheck" not in scripts


def test_the_readme_s_cluster_command_runs_as_printed(cluster, tmp_path):
    """README.md's ReFrame command on the cluster, as printed, in a shell with the venv and
    the test bed's Slurm (its `env`) and nothing of bin/iostack's: every node passes."""
    readme = (pathlib.Path(IOSTACK).parent.parent / "README.md").read_text()
    (command,) = [c.replace("\\\n", " ") for c in re.findall(
        r"^reframe -C [^\n]*--system local-cluster \\\n[^\n]*$", readme, re.M)]
    venv = pathlib.Path(IOSTACK).parent.parent / ".venv"
    env = {"HOME": str(tmp_path), "PATH": f"{venv}/bin:/usr/local/bin:/usr/bin:/bin",
           "LANG": "C.UTF-8", **cluster.env()}
    p = subprocess.run(["bash", "-c", f". /usr/share/lmod/lmod/init/bash && {command}"],
                       cwd=pathlib.Path(IOSTACK).parent.parent, env=env, capture_output=True,
                       text=True, timeout=1200)
    out = re.sub(r"\x1b\[[0-9;]*m", "", p.stdout + p.stderr)
    assert p.returncode == 0, out[-3000:]
    ran = re.search(r"\[ +PASSED +\] Ran (\d+)/(\d+) test case", out)
    assert ran and int(ran.group(1)) == len(nodes(cluster)), out[-2000:]


# the module's cluster stops here: tests that use it come before
def test_down_leaves_nothing(cluster):
    assert cluster.down() == []
    assert leftovers(cluster.state, cluster.prefix) == []


def test_a_killed_up_is_cleaned_by_down(tmp_path_factory):
    """`up` killed while its daemons start: namespaces, loop devices, mounts and processes
    exist; `down` from the state directory alone removes them all."""
    # short: slurmstepd's sockets live under it (cluster.py)
    state = tmp_path_factory.mktemp("killed")
    up = subprocess.Popen([*TESTBED, "cluster", "up", "--state-dir", str(state)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 1800  # a hang guard: met as soon as the daemons start
    while not (state / "log" / "slurmd-node2.console").exists():
        assert up.poll() is None and time.monotonic() < deadline, "up never reached its daemons"
        time.sleep(0.1)
    os.kill(up.pid, signal.SIGKILL)
    up.wait()
    prefix = harness.LocalCluster(state).prefix
    before = leftovers(state, prefix)
    kinds = {item.split()[0] for item in before}
    assert {"netns", "link", "loop", "mount", "process"} <= kinds, before
    p = run(*TESTBED, "cluster", "down", "--state-dir", state)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "nothing left" in p.stdout
    assert leftovers(state, prefix) == []


def test_bad_places_are_refused_in_one_line(tmp_path):
    p = run(*TESTBED, "cluster", "up", "--state-dir", "/mnt/localdisk/cluster")
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "iostack-testbed: error: state directory /mnt/localdisk/cluster is under /mnt/localdisk, "
        "which is private to each node; use another"]
    p = run(*TESTBED, "cluster", "env", "--state-dir", tmp_path)
    assert (p.returncode, p.stderr.strip()) == (2, f"iostack-testbed: error: no cluster is up in {tmp_path}")


def test_nightly_starts_and_stops_its_own_cluster(tmp_path, tmp_path_factory):
    """`iostack-testbed run cluster -- bin/iostack nightly --system local-cluster`: a cluster
    for the run only, and the run's exit status."""
    # a short state directory: slurmstepd's sockets live under it (cluster.py)
    state = tmp_path_factory.mktemp("rc")
    p = run(*TESTBED, "run", "cluster", "--state-dir", state, "--",
            IOSTACK, "nightly", "--site", "local", "--system", "local-cluster",
            "--root", tmp_path, "--", "-n", "NodeHardwareCheck",
            env={"SLURM_CONF": "", "IOSTACK_CLUSTER_SSH_CONFIG": ""})
    print(p.stdout[-3000:], p.stderr[-2000:])
    assert p.returncode == 0
    assert "starting the cluster test bed" in p.stdout and "the cluster test bed is stopped" in p.stdout
    # one node of each partition: nps1, nps2 and smt
    assert re.search(r"Ran 3/3 test case\(s\)", p.stdout)
    assert leftovers(state, harness.LocalCluster(state).prefix) == []


def test_a_node_lets_go_of_what_the_host_unmounts(tmp_path, tmp_path_factory):
    """A node's mount namespace is a slave of the host's: a file system the host unmounts
    after `up` (where its mounts are shared, as systemd makes them) is gone from the nodes
    too, rather than kept busy there until `down`."""
    shared = tmp_path / "shared"
    (shared / "inner").mkdir(parents=True)
    run("mount", "--bind", shared, shared)
    run("mount", "--make-shared", shared)
    c = harness.LocalCluster(tmp_path_factory.mktemp("lg"))
    try:
        assert run("mount", "-t", "tmpfs", "tmpfs", shared / "inner").returncode == 0
        c.start()
        in_node = f"findmnt -n -o FSTYPE {shared / 'inner'}"
        assert c.ssh("node1", in_node).stdout.strip() == "tmpfs"
        assert run("umount", shared / "inner").returncode == 0
        assert c.ssh("node1", in_node).stdout.strip() == ""
    finally:
        c.down(quiet=True)
        run("umount", "-R", shared)
    assert leftovers(c.state, c.prefix) == []
