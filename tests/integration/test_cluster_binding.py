"""The binding check (reframe-tests/checks/binding.py) on the multi-node cluster, with each
node layout it emulates: NPS1 (node1-3), NPS2 (node4: its NUMA domains as Slurm's sockets,
hwloc's topology in its jobs), SMT on (node5: pairs of CPUs as one core's two hardware
threads). Every rank and OpenMP thread lands where the layout and the partition's srun
options (ARCHER2's, [ARCHER2-Scheduler]) say, on one node and on two; and the same check
fails when an option is left out: without --hint=nomultithread a rank on the SMT node holds
both threads of its core; without --distribution=block:block ranks leave the block order,
which only a node with two or more cores per NUMA domain can show (4 CPUs or more: on fewer
that run is skipped, and tests/unit/test_binding.py judges Slurm's documented placements
instead). Needs root."""
import os

import pytest
from cluster_fixtures import last_attempts, nightly, running_cluster

from iostack_rfm.parsers import binding
from iostack_testbed import cluster as harness

pytestmark = [pytest.mark.skipif(harness.unavailable_reason() is not None,
                                 reason=harness.unavailable_reason() or ""),
              pytest.mark.usefixtures("loop_devices")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory, "clb") as c:
        yield c


def results(report) -> dict[str, dict]:
    """{'<partition> threads=<n>': test case} of the last attempts."""
    return {f"{tc['partition']} threads={tc['display_name'].split('%threads=')[1].split()[0]}": tc
            for tc in last_attempts(report).values()}


def test_every_rank_and_thread_lands_as_each_layout_says(cluster, tmp_path):
    p, report = nightly(cluster, tmp_path, "-n", "BindingCheck")
    got = {name: tc["result"] for name, tc in results(report).items()}
    assert got == {"nps1 threads=1": "pass", "nps1 threads=2": "pass",
                   "nps2 threads=1": "pass", "nps2 threads=2": "pass",
                   "smt threads=1": "pass", "smt threads=2": "skip"}, results(report)
    assert p.returncode == 0
    by = results(report)
    # what the jobs saw, from hwloc: NPS2's two NUMA domains, SMT's two threads per core
    seen = {name: binding.parse(open(os.path.join(tc["outputdir"], "rfm_job.out")).read())
            for name, tc in by.items() if tc["result"] == "pass"}
    topology = {name: next(r["topology"] for r in records if "topology" in r)
                for name, records in seen.items()}
    assert len(topology["nps2 threads=1"]["numa"]) == 2
    assert {len(c) for c in topology["smt threads=1"]["cores"]} == {2}
    assert all(len(r["proc"]) == 1 for r in seen["smt threads=1"])     # one thread of a core
    # two threads of one rank, each on its own core
    (rank,) = seen["nps1 threads=2"][:1]
    assert [len(t["proc"]) for t in rank["threads"]] == [1, 1]
    assert rank["threads"][0]["proc"] != rank["threads"][1]["proc"]


def test_ranks_of_two_nodes_each_land_on_their_own_cores(cluster, tmp_path):
    p, report = nightly(cluster, tmp_path, "--system", "local-cluster:nps1", "-n",
                        "BindingCheck", "-S", "nodes=2")
    by = results(report)
    assert {n: tc["result"] for n, tc in by.items()} == {
        "nps1 threads=1": "pass", "nps1 threads=2": "pass"}, by
    records = binding.parse(open(os.path.join(by["nps1 threads=1"]["outputdir"],
                                              "rfm_job.out")).read())
    assert sorted({r["host"] for r in records}) == ["node1", "node2"]


def test_without_one_task_per_core_a_rank_holds_both_threads_of_a_core(cluster, tmp_path):
    p, report = nightly(cluster, tmp_path, "--system", "local-cluster:smt", "-n",
                        "BindingCheck", "-S", "without=--hint=nomultithread")
    tc = results(report)["smt threads=1"]
    assert tc["result"] == "fail"
    assert ("node5: rank 0 (local 0): CPUs 0-1 hold both hardware threads of core 0: one "
            "task per core means one thread of each (--hint=nomultithread)") in tc["fail_reason"]
    assert p.returncode != 0


@pytest.mark.skipif((os.cpu_count() or 1) < 4,
                    reason=f"{os.cpu_count()} CPUs: a node needs 2 cores per NUMA domain for "
                           "block and cyclic to place ranks differently (4 CPUs or more)")
def test_without_block_distribution_ranks_leave_the_block_order(cluster, tmp_path):
    # Slurm's default is block:cyclic: on the NPS2 node consecutive ranks alternate sockets
    p, report = nightly(cluster, tmp_path, "--system", "local-cluster:nps2", "-n",
                        "BindingCheck", "-S", "without=--distribution=block:block")
    tc = results(report)["nps2 threads=1"]
    assert tc["result"] == "fail"
    assert "--distribution=*:block fills a node's cores in rank order" in tc["fail_reason"]
