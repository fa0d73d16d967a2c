"""Helpers of the multi-node cluster tests: what of a cluster is left on this machine,
seen without the harness's own bookkeeping (ip, losetup, the mount table, /proc)."""
from __future__ import annotations

import contextlib
import json
import os
import pathlib
import subprocess
import sys

from iostack.core import paths

IOSTACK = str(paths.REPO / "bin" / "iostack")
#: an MPI program each rank of which exchanges a MiB with its neighbours: it prints
#: 'received ok' once per rank
HELLO = r"""
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#define BYTES (1 << 20)
static char out[BYTES], in[BYTES];
int main(int argc, char **argv) {
    int rank, size, sum = 0, per_node = 2;
    char host[64];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    gethostname(host, sizeof host);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    /* 1 MiB to the same slot on the next node, from the previous one */
    memset(out, rank, BYTES);
    MPI_Sendrecv(out, BYTES, MPI_CHAR, (rank + per_node) % size, 0, in, BYTES, MPI_CHAR,
                 (rank - per_node + size) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int from = (rank - per_node + size) % size, ok = 1;
    for (int i = 0; i < BYTES; i++) ok &= in[i] == (char)from;
    printf("rank %d of %d on %s sum %d received %s\n", rank, size, host, sum, ok ? "ok" : "BAD");
    MPI_Finalize();
    return 0;
}
"""

#: the test beds' command (tools/testbed), this checkout's (conftest's PYTHONPATH)
TESTBED = (sys.executable, "-m", "iostack_testbed")


@contextlib.contextmanager
def running_cluster(tmp_path_factory, name: str, **options):
    """A local cluster up in a fresh state directory for a module's tests, down after them."""
    from iostack_testbed import cluster as harness

    c = harness.LocalCluster(tmp_path_factory.mktemp(name), **options)
    c.start()
    try:
        yield c
    finally:
        c.down(quiet=True)


def run(*argv, env=None, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def leftovers(state: pathlib.Path, prefix: str) -> list[str]:
    """Network namespaces and links named with the cluster's prefix, loop devices backed
    by files of its state directory, mounts under it, and processes whose command line
    names it (every daemon of a node is started with its config from there)."""
    out = [f"netns {n}" for n in run("ip", "netns", "list").stdout.split()
           if n.startswith(prefix)]
    links = json.loads(run("ip", "-j", "link", "show").stdout or "[]")
    out += [f"link {link['ifname']}" for link in links if link["ifname"].startswith(prefix)]
    out += [f"loop {line}" for line in run("losetup", "-a").stdout.splitlines()
            if str(state) in line]
    out += [f"mount {line}" for line in pathlib.Path("/proc/self/mountinfo").read_text().splitlines()
            if str(state) in line]
    for proc in pathlib.Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if proc.name.isdigit() and str(state) in cmdline and int(proc.name) != os.getpid():
            out.append(f"process {proc.name}: {cmdline[:120]}")
    return out


def last_attempts(report: dict) -> dict:
    """Each test case's last attempt (the nightly retries once), by display name and
    partition."""
    out = {}
    for attempt in report["runs"]:
        for tc in attempt["testcases"]:
            out[f"{tc['display_name']}@{tc['partition']}"] = tc
    return out


def nightly(cluster, root: pathlib.Path, *reframe_args, timeout=1800):
    """`bin/iostack nightly` on local-cluster with a running cluster; (process, report)."""
    p = run(IOSTACK, "nightly", "--site", "local", "--system", "local-cluster", "--root", root,
            "--", *reframe_args, env=cluster.env(), timeout=timeout)
    print(p.stdout[-6000:], p.stderr[-3000:])
    reports = sorted((root / "reframe" / "reports").glob("run-report-*.json"),
                     key=os.path.getmtime)
    assert reports, "ReFrame wrote no report"
    return p, json.loads(reports[-1].read_text())
