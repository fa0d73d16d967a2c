"""The binding check's judge (reframe-tests/iostack_rfm/parsers/binding.py) on where Slurm puts ranks
on an ARCHER2 compute node (2 x 64-core EPYC 7742, NPS4, SMT on [ARCHER2-Hardware]; Linux
numbers core i's second hardware thread i + 128) with ARCHER2's srun options
(--hint=nomultithread --distribution=block:block [ARCHER2-Scheduler]), and without each of
them: Slurm's default distribution is block:cyclic (ranks alternate sockets), and without
the hint a task of one CPU gets a whole core, both its threads (srun(1), --distribution and
--hint)."""
import json

from iostack_rfm.parsers import binding

CORES, SOCKETS, NPS = 128, 2, 4
SRUN = ["--hint=nomultithread", "--distribution=block:block"]


def topology(nps=NPS, smt=True):
    per_numa = CORES // (SOCKETS * nps)
    pus = (lambda c: [c, c + CORES]) if smt else (lambda c: [c])
    return {"packages": [sum((pus(c) for c in range(s * 64, (s + 1) * 64)), [])
                         for s in range(SOCKETS)],
            "numa": [sum((pus(c) for c in range(n * per_numa, (n + 1) * per_numa)), [])
                     for n in range(SOCKETS * nps)],
            "cores": [pus(c) for c in range(CORES)]}


def job(placement, threads=1, host="nid001000", topo=None, rank0=0):
    """`binding:` lines of one node's ranks: placement(k) -> the CPUs of local rank k;
    threads bound one per core of the rank's, in order (OMP_PLACES=cores, close)."""
    lines = []
    for k in range(CORES // threads):
        cpus = sorted(placement(k))
        cores = sorted({c % CORES for c in cpus})
        record = {"host": host, "rank": rank0 + k, "local": k, "proc": cpus, "hwloc": cpus,
                  "threads": [{"thread": t, "proc": [c for c in cpus if c % CORES == core],
                               "hwloc": [c for c in cpus if c % CORES == core]}
                              for t, core in enumerate(cores[:threads])]}
        if k == 0:
            record["topology"] = topo or topology()
        lines.append("binding: " + json.dumps(record))
    return "\n".join(lines) + "\n"


def block(threads=1):
    return lambda k: range(k * threads, (k + 1) * threads)


def block_cyclic(k):
    """Slurm's default: rank k on socket k mod 2, the next free core there."""
    return [(k % 2) * 64 + k // 2]


def whole_core(k):
    return [k, k + CORES]


def layout(threads=1, options=SRUN, nodes=1):
    return binding.layout_from_options(options, nps=NPS, smt=True, nodes=nodes,
                                       tasks_per_node=CORES // threads,
                                       cpus_per_task=threads, threads=threads)


def test_archer2s_placement_is_as_its_layout_says():
    assert binding.problems(job(block()), layout()) == []
    assert binding.problems(job(block(2), threads=2), layout(threads=2)) == []
    two_nodes = job(block()) + job(block(), host="nid001001", rank0=CORES)
    assert binding.problems(two_nodes, layout(nodes=2)) == []


def test_the_options_give_the_layout():
    got = binding.layout_from_options(SRUN)
    assert (got.one_task_per_core, got.distribution) == (True, "block")
    got = binding.layout_from_options(["--cpu-bind=cores", "--distribution=block:cyclic"])
    assert (got.one_task_per_core, got.distribution) == (False, "cyclic")
    assert binding.layout_from_options([]).distribution is None


def test_without_block_distribution_ranks_alternate_sockets_and_fail():
    found = binding.problems(job(block_cyclic), layout())
    assert found[0] == ("nid001000: rank 2 (local 2): on core(s) 1, before the previous "
                        "rank's core 64: --distribution=*:block fills a node's cores in rank "
                        "order")
    # a site that asks for block:cyclic is held to that, and block fails there
    cyclic = layout(options=["--hint=nomultithread", "--distribution=block:cyclic"])
    assert binding.problems(job(block_cyclic), cyclic) == []
    assert binding.problems(job(block()), cyclic) == [
        "nid001000: ranks 0 and 1 are both in package 0: --distribution=*:cyclic alternates "
        "packages"]


def test_without_the_hint_a_rank_holds_both_threads_of_its_core_and_fails():
    found = binding.problems(job(whole_core), layout())
    assert found[0] == ("nid001000: rank 0 (local 0): CPUs 0,128 hold both hardware threads "
                        "of core 0: one task per core means one thread of each "
                        "(--hint=nomultithread)")
    assert len(found) == CORES


def test_a_node_booted_in_another_mode_fails_on_its_topology():
    nps1 = job(block(), topo=topology(nps=1))
    assert binding.problems(nps1, layout()) == [
        "nid001000: hwloc sees 2 NUMA domain(s) in 2 package(s), 1 per package; the site "
        "says NPS4"]
    smt_off = job(lambda k: [k], topo=topology(smt=False))
    assert binding.problems(smt_off, layout()) == [
        "nid001000: hwloc sees 1 hardware thread(s) per core; the site says SMT on (2)"]


def test_ranks_across_numa_domains_sharing_cores_or_missing_fail():
    # rank 15 on cores 15 and 16: NUMA domains 0 and 1 (16 cores each), 2 fit in one
    def straddle(k):
        return [2 * k + 1, (2 * k + 2) % CORES]
    found = binding.problems(job(straddle, threads=2), layout(threads=2))
    assert ("nid001000: rank 7 (local 7): CPUs 15-16 span NUMA domains 0, 1; 2 fit in one"
            in found)
    shared = binding.problems(job(lambda k: [k // 2]), layout())
    assert "nid001000: rank 1 (local 1): shares core 0 with rank 0" in shared
    lines = job(block()).splitlines()
    assert binding.problems("\n".join(lines[:-1]), layout())[0] == \
        "127 rank(s) reported, expected 128"


def test_threads_on_one_core_or_unbound_fail():
    record = {"host": "n", "rank": 0, "local": 0, "proc": [0, 1], "hwloc": [0, 1],
              "threads": [{"thread": 0, "proc": [0], "hwloc": [0]},
                          {"thread": 1, "proc": [0], "hwloc": [0]}],
              "topology": {"packages": [[0, 1]], "numa": [[0, 1]], "cores": [[0], [1]]}}
    two = binding.Layout(nps=1, smt=False, one_task_per_core=True, distribution="block",
                         tasks_per_node=1, cpus_per_task=2, threads=2)
    assert binding.problems("binding: " + json.dumps(record), two) == [
        "n: rank 0 (local 0) thread 1: shares core 0 with thread 0"]
    record["threads"][1] = {"thread": 1, "proc": [0, 1], "hwloc": [1]}
    assert binding.problems("binding: " + json.dumps(record), two) == [
        "n: rank 0 (local 0) thread 1: /proc says CPUs 0-1, hwloc says 1",
        "n: rank 0 (local 0) thread 1: on 2 cores (0-1); OMP_PLACES=cores binds each thread "
        "to one"]
