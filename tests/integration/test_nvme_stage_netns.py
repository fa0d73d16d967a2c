"""nvme-stage across a real network link: node n1 lives in its own network
namespace behind a veth pair, and fan-out/collect reach it over TCP.

This VM has no sshd, so instead of an rsync daemon (which would need a
different URL form than the host:path the tool uses on clusters) n1 runs a
minimal TCP "remote shell": it reads one command line and runs it with the
socket as stdin/stdout, which is all rsync asks of ssh. The tool's command
lines are therefore exactly the production ones. Needs root (netns, mounts).
"""
from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time

import pytest

from test_nvme_stage import Cluster, decompose_on_head, make_shared_case, \
    rsync_lines, solve_everywhere, tree_digest

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
    pytest.mark.skipif(not shutil.which("ip") or not shutil.which("rsync"),
                       reason="needs iproute2 and rsync"),
]

SERVER = """import socket, subprocess, sys, threading
server = socket.create_server((sys.argv[1], int(sys.argv[2])))
while True:
    conn, _ = server.accept()
    line = b""
    while not line.endswith(b"\\n"):   # byte by byte: what follows is rsync's stream
        ch = conn.recv(1)
        if not ch:
            break
        line += ch
    proc = subprocess.Popen(["sh", "-c", line.decode()], stdin=conn.fileno(),
                            stdout=conn.fileno())
    conn.close()
    threading.Thread(target=proc.wait, daemon=True).start()
"""

CLIENT = """import os, socket, sys, threading
sock = socket.create_connection((sys.argv[1], int(os.environ["TCP_RSH_PORT"])))
sock.sendall(" ".join(sys.argv[2:]).encode() + b"\\n")   # ssh joins the words too
def upload():
    while data := os.read(0, 1 << 16):
        sock.sendall(data)
    sock.shutdown(socket.SHUT_WR)
threading.Thread(target=upload, daemon=True).start()
while data := sock.recv(1 << 16):
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
"""

PORT = 7022


def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def netns_node(tmp_path):
    """n1's NVMe reachable at an address inside its own network namespace."""
    tag = os.getpid() % 100000
    ns, veth_head, veth_node = f"nvstage{tag}", f"nvh{tag}", f"nvn{tag}"
    subnet = f"10.213.{tag % 250}"
    cluster = Cluster(tmp_path)
    (tmp_path / "server.py").write_text(SERVER)
    client = tmp_path / "tcp-rsh"
    client.write_text(f"#!{sys.executable}\n" + CLIENT)
    client.chmod(0o755)
    ip("netns", "add", ns)
    server = None
    try:
        ip("link", "add", veth_head, "type", "veth", "peer", "name", veth_node)
        ip("link", "set", veth_node, "netns", ns)
        ip("addr", "add", f"{subnet}.1/30", "dev", veth_head)
        ip("link", "set", veth_head, "up")
        ip("netns", "exec", ns, "ip", "addr", "add", f"{subnet}.2/30", "dev", veth_node)
        ip("netns", "exec", ns, "ip", "link", "set", veth_node, "up")
        server = subprocess.Popen(
            ["ip", "netns", "exec", ns, "unshare", "--mount", "sh", "-c",
             'mount --bind "$1" "$2" && exec "$3" "$4" "$5" "$6"', "node",
             cluster.nodes / "n1", cluster.nvme, sys.executable, tmp_path / "server.py",
             f"{subnet}.2", str(PORT)])
        end = time.monotonic() + 600  # a hang guard: met as soon as the server listens
        while True:
            try:
                socket.create_connection((f"{subnet}.2", PORT), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.1)
        cluster.env.update(NVME_STAGE_RSH=str(client), TCP_RSH_PORT=str(PORT))
        yield cluster, f"{subnet}.2", veth_head
    finally:
        if server:
            server.terminate()
            server.wait(timeout=300)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", veth_head], capture_output=True)


def tx_bytes(dev: str) -> int:
    return int(pathlib.Path(f"/sys/class/net/{dev}/statistics/tx_bytes").read_text())


def test_fan_out_and_collect_over_veth(netns_node):
    c, address, veth = netns_node
    make_shared_case(c.shared)
    c.run_on("head", "stage-in", c.shared, c.case)
    decompose_on_head(c)

    sent_before = tx_bytes(veth)
    out = c.run_on("head", "fan-out", c.case, address).stdout
    assert f"{address}:{c.case}/" in rsync_lines(out)[0]
    head_tree = tree_digest(c.case_on("head"), skip=[".nvme-stage"])
    assert tree_digest(c.case_on("n1")) == head_tree
    case_bytes = sum(p.stat().st_size for p in c.case_on("n1").rglob("*") if p.is_file())
    assert tx_bytes(veth) - sent_before >= case_bytes    # it really went over the link

    solve_everywhere(c)     # n1 owns ranks 2 and 3 in the layout below
    layout = ["--hosts", f"head,{address},n2", "--tasks-per-node", "2(x3)"]
    c.run_on("head", "collect", c.case, address, *layout)
    # n1's own ranks come back; the head keeps its versions of all the others
    expected = {0: "head solved", 1: "head solved", 2: "n1 solved", 3: "n1 solved",
                4: "head stale", 5: "head stale"}
    for rank, start in expected.items():
        text = (c.case_on("head") / f"processor{rank}" / "100" / "U").read_text()
        assert text.startswith(start), (rank, text[:20])
    assert (c.case_on("head") / ".nvme-stage" / f"collect.{address}.done").is_file()
