"""Judging where a job's ranks and threads ran (reframe-tests/src/binding/binding_probe.c,
one `binding:` line per rank) against the layout the site's facts give its nodes: NPS (NUMA
domains per package), SMT (hardware threads per core), and the placement its srun options
ask for (sites/<site>.yaml, `slurm.srun`; [ARCHER2-Scheduler]: --hint=nomultithread
--distribution=block:block).

    problems(text, Layout(...)) -> ["node5: rank 0 has both hardware threads of core 0 ...", ...]

Rules, each a line naming the node and rank where it is broken:

- topology: hwloc sees `nps` NUMA domains per package and, with `smt`, 2 hardware threads
  per core (1 without);
- every rank of the job reported, `nodes` nodes, `threads` threads each;
- the rank's CPUs read from /proc/self/status are the ones hwloc reads;
- `cpus_per_task` CPUs per rank: with one task per core (--hint=nomultithread) that many
  cores, one hardware thread of each; else that many hardware threads;
- no two ranks of a node share a core (a hardware thread, without one task per core);
- a rank that fits in one NUMA domain is in one;
- distribution `block` (the second level of --distribution): a node's ranks take its cores in
  order, rank k+1's after rank k's; `cyclic`: consecutive ranks alternate between the node's
  packages;
- each OpenMP thread on one core of its rank's (OMP_PLACES=cores), no two on one core.

Standard library only.
"""
from __future__ import annotations

import dataclasses
import json

PREFIX = "binding:"


@dataclasses.dataclass
class Layout:
    """What a job of the check should find: from the partition's facts (nps, smt, srun
    options) and the job's shape."""
    nps: int | None = None
    smt: bool | None = None
    one_task_per_core: bool = False
    distribution: str | None = None      # the second level of --distribution
    nodes: int = 1
    tasks_per_node: int = 1
    cpus_per_task: int = 1
    threads: int = 1


def layout_from_options(options: list[str], **shape) -> Layout:
    """A Layout from srun options (--hint=nomultithread, --distribution=A:B) and the rest."""
    distribution = None
    for opt in options:
        if opt.startswith("--distribution=") or opt.startswith("-m="):
            levels = opt.split("=", 1)[1].split(",")[0].split(":")
            distribution = levels[1] if len(levels) > 1 else None
    return Layout(one_task_per_core="--hint=nomultithread" in options,
                  distribution=distribution, **shape)


def parse(text: str) -> list[dict]:
    return [json.loads(line[len(PREFIX):]) for line in text.splitlines()
            if line.startswith(PREFIX)]


def _cpus(cpus) -> str:
    """[0, 1, 2, 5] -> '0-2,5'"""
    out: list[str] = []
    run: list[int] = []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out) or "none"


class _Node:
    def __init__(self, topology: dict):
        self.packages = [set(p) for p in topology["packages"]]
        self.numa = [set(n) for n in topology["numa"]]
        self.cores = [set(c) for c in topology["cores"]]
        self.core_of = {pu: i for i, core in enumerate(self.cores) for pu in core}
        self.numa_of = {pu: i for i, n in enumerate(self.numa) for pu in n}
        self.package_of = {pu: i for i, p in enumerate(self.packages) for pu in p}

    def cores_in(self, cpus) -> list[int]:
        return sorted({self.core_of[c] for c in cpus if c in self.core_of})


def _topology_problems(host: str, node: _Node, layout: Layout) -> list[str]:
    out = []
    if layout.nps and node.packages:
        per_package = len(node.numa) / len(node.packages)
        if per_package != layout.nps:
            out.append(f"{host}: hwloc sees {len(node.numa)} NUMA domain(s) in "
                       f"{len(node.packages)} package(s), {per_package:g} per package; "
                       f"the site says NPS{layout.nps}")
    if layout.smt is not None and node.cores:
        threads = max(len(c) for c in node.cores)
        want = 2 if layout.smt else 1
        if threads != want:
            out.append(f"{host}: hwloc sees {threads} hardware thread(s) per core; the site "
                       f"says SMT {'on' if layout.smt else 'off'} ({want})")
    return out


def problems(text: str, layout: Layout) -> list[str]:
    """What is wrong with where the job's ranks and threads ran; [] when all is as the
    layout says."""
    records = parse(text)
    want_ranks = layout.nodes * layout.tasks_per_node
    out: list[str] = []
    if len(records) != want_ranks:
        out.append(f"{len(records)} rank(s) reported, expected {want_ranks}")
    by_host: dict[str, list[dict]] = {}
    for r in records:
        by_host.setdefault(r["host"], []).append(r)
    if len(by_host) != layout.nodes:
        out.append(f"ranks ran on {len(by_host)} node(s) ({', '.join(sorted(by_host))}), "
                   f"expected {layout.nodes}")
    for host, ranks in sorted(by_host.items()):
        topologies = [r["topology"] for r in ranks if "topology" in r]
        if not topologies:
            out.append(f"{host}: no topology (no rank with local id 0)")
            continue
        node = _Node(topologies[0])
        out += _topology_problems(host, node, layout)
        out += _rank_problems(host, node, sorted(ranks, key=lambda r: r["local"]), layout)
    return out


def _rank_problems(host: str, node: _Node, ranks: list[dict], layout: Layout) -> list[str]:
    out = []
    owner: dict[int, int] = {}
    unit = "core" if layout.one_task_per_core else "hardware thread"
    cores_per_numa = min((len(node.cores_in(n)) for n in node.numa), default=0)
    previous_last = None
    for r in ranks:
        where = f"{host}: rank {r['rank']} (local {r['local']})"
        cpus = set(r["proc"])
        if set(r["hwloc"]) != cpus:
            out.append(f"{where}: /proc/self/status says CPUs {_cpus(cpus)}, hwloc says "
                       f"{_cpus(r['hwloc'])}")
        cores = node.cores_in(cpus)
        if layout.one_task_per_core:
            doubled = [c for c in cores if len(node.cores[c] & cpus) > 1]
            if doubled:
                out.append(f"{where}: CPUs {_cpus(cpus)} hold "
                           f"{'both' if len(node.cores[doubled[0]] & cpus) == 2 else 'several'} "
                           f"hardware threads of core {doubled[0]}: one task per core means "
                           f"one thread of each (--hint=nomultithread)")
            if len(cores) != layout.cpus_per_task:
                out.append(f"{where}: CPUs {_cpus(cpus)} are {len(cores)} core(s), expected "
                           f"{layout.cpus_per_task}")
        elif len(cpus) != layout.cpus_per_task:
            out.append(f"{where}: {len(cpus)} CPUs ({_cpus(cpus)}), expected "
                       f"{layout.cpus_per_task}")
        for unit_id in (cores if layout.one_task_per_core else sorted(cpus)):
            if unit_id in owner:
                out.append(f"{where}: shares {unit} {unit_id} with rank {owner[unit_id]}")
            owner.setdefault(unit_id, r["rank"])
        domains = sorted({node.numa_of[c] for c in cpus if c in node.numa_of})
        if len(domains) > 1 and layout.cpus_per_task <= cores_per_numa:
            out.append(f"{where}: CPUs {_cpus(cpus)} span NUMA domains "
                       f"{', '.join(map(str, domains))}; {layout.cpus_per_task} fit in one")
        if layout.distribution == "block" and cores:
            if previous_last is not None and cores[0] < previous_last:
                out.append(f"{where}: on core(s) {_cpus(cores)}, before the previous rank's "
                           f"core {previous_last}: --distribution=*:block fills a node's "
                           f"cores in rank order")
            previous_last = cores[-1]
        out += _thread_problems(where, node, cpus, r.get("threads", []), layout)
    if layout.distribution == "cyclic" and len(node.packages) > 1:
        seq = [sorted({node.package_of[c] for c in r["proc"] if c in node.package_of})
               for r in ranks]
        for k in range(1, min(len(ranks), len(node.packages))):
            if seq[k] == seq[k - 1]:
                out.append(f"{host}: ranks {ranks[k - 1]['rank']} and {ranks[k]['rank']} are "
                           f"both in package {seq[k][0] if seq[k] else '?'}: "
                           "--distribution=*:cyclic alternates packages")
                break
    return out


def _thread_problems(where: str, node: _Node, cpus: set, threads: list[dict],
                     layout: Layout) -> list[str]:
    out = []
    if len(threads) != layout.threads:
        out.append(f"{where}: {len(threads)} OpenMP thread(s), expected {layout.threads}")
    seen: dict[int, int] = {}
    for t in threads:
        mine = set(t["proc"])
        if set(t["hwloc"]) != mine:
            out.append(f"{where} thread {t['thread']}: /proc says CPUs {_cpus(mine)}, hwloc "
                       f"says {_cpus(t['hwloc'])}")
        if not mine <= cpus:
            out.append(f"{where} thread {t['thread']}: CPUs {_cpus(mine)} outside its rank's "
                       f"{_cpus(cpus)}")
        cores = node.cores_in(mine)
        if len(cores) != 1:
            out.append(f"{where} thread {t['thread']}: on {len(cores)} cores "
                       f"({_cpus(mine)}); OMP_PLACES=cores binds each thread to one")
            continue
        if cores[0] in seen:
            out.append(f"{where} thread {t['thread']}: shares core {cores[0]} with thread "
                       f"{seen[cores[0]]}")
        seen.setdefault(cores[0], t["thread"])
    return out
