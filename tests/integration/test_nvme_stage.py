"""nvme-stage moving a small fake OpenFOAM case through [OCI-OpenFOAM]'s seven steps.

Nodes are directories. Every node's NVMe is mounted at one path, as on a
cluster: a command "on" a node runs in a private mount namespace where that
node's directory is bind-mounted over the NVMe path, and the remote shell
given to rsync with --rsh does the same for the remote node. So the tool
runs its production command lines (host:path over a remote shell) while all
the data stays on this machine. Needs root for mount namespaces.
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import signal
import subprocess
import time

import pytest

TOOL = pathlib.Path(__file__).resolve().parents[2] / "src" / "nvme-stage" / "nvme-stage"
HOSTS = ("head", "n1", "n2")
RANKS_PER_NODE = 2

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces need root"),
    pytest.mark.skipif(not shutil.which("rsync") or not shutil.which("unshare"),
                       reason="needs rsync and unshare"),
]

FAKE_RSH = """#!/bin/sh
# stand-in for ssh: the "remote" node is a directory mounted over the NVMe path
host=$1
shift
exec unshare --mount sh -c 'mount --bind "$1" "$2" && shift 2 && exec sh -c "$*"' \\
    fake-rsh "$FAKE_NODES/$host" "$FAKE_NVME" "$@"
"""


class Cluster:
    def __init__(self, root: pathlib.Path):
        self.root = root
        self.nvme = root / "nvme"          # the node-local mount point, same on all nodes
        self.case = self.nvme / "motorBike"
        self.shared = root / "shared" / "motorBike"
        self.nodes = root / "nodes"
        self.rsh = root / "fake-rsh"
        self.nvme.mkdir()
        for host in HOSTS:
            (self.nodes / host).mkdir(parents=True)
        self.rsh.write_text(FAKE_RSH)
        self.rsh.chmod(0o755)
        self.env = dict(os.environ, FAKE_NODES=str(self.nodes), FAKE_NVME=str(self.nvme),
                        NVME_STAGE_RSH=str(self.rsh))
        self.env.pop("NVME_STAGE_RSYNC_OPTS", None)

    def case_on(self, host: str) -> pathlib.Path:
        """Where a node's copy of the case really is."""
        return self.nodes / host / self.case.relative_to(self.nvme)

    def command_on(self, host: str, *args) -> list[str]:
        return ["unshare", "--mount", "sh", "-c", 'mount --bind "$1" "$2" && shift 2 && exec "$@"',
                "on-node", str(self.nodes / host), str(self.nvme), *map(str, args)]

    def run_on(self, host: str, *args, check: bool = True, env: dict | None = None):
        # Slurm names the node in every step's environment
        env = dict(env or self.env, SLURMD_NODENAME=host)
        proc = subprocess.run(self.command_on(host, TOOL, *args), capture_output=True,
                              text=True, env=env, timeout=1800)
        if check:
            assert proc.returncode == 0, f"{args}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return proc


def tree_digest(top: pathlib.Path, skip=()) -> dict[str, str]:
    """sha256 of every file under top, by relative path."""
    out = {}
    for p in sorted(top.rglob("*")):
        rel = p.relative_to(top).as_posix()
        if any(rel == s or rel.startswith(s + "/") for s in skip):
            continue
        if p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def write(path: pathlib.Path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def make_shared_case(shared: pathlib.Path):
    write(shared / "system" / "controlDict", "application simpleFoam;\nwriteInterval 10;\n")
    write(shared / "system" / "decomposeParDict", f"numberOfSubdomains {3 * RANKS_PER_NODE};\n")
    write(shared / "constant" / "polyMesh" / "points", "points\n" * 5000)
    write(shared / "0" / "U", "internalField uniform (20 0 0);\n")
    (shared / "constant" / "triSurface").mkdir(parents=True)
    (shared / "constant" / "triSurface" / "motorBike.obj").write_bytes(os.urandom(300_000))


def rsync_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("nvme-stage: run: ")]


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path)
    make_shared_case(c.shared)
    return c


LAYOUT = ["--hosts", ",".join(HOSTS), "--tasks-per-node", f"{RANKS_PER_NODE}(x{len(HOSTS)})"]


def decompose_on_head(c: Cluster):
    """Step 2 stand-in: decomposePar writes processor0..5 on the head's NVMe."""
    for rank in range(len(HOSTS) * RANKS_PER_NODE):
        write(c.case_on("head") / f"processor{rank}" / "constant" / "polyMesh" / "points",
              f"points of rank {rank}\n" * 200)
        write(c.case_on("head") / f"processor{rank}" / "0" / "U", f"rank {rank} initial\n")


def solve_everywhere(c: Cluster):
    """Steps 4-5 stand-in: every node writes time 100 into every processor dir it
    has, though only its own ranks' results are real; the rest must stay put."""
    for node_index, host in enumerate(HOSTS):
        own = range(node_index * RANKS_PER_NODE, (node_index + 1) * RANKS_PER_NODE)
        for rank in range(len(HOSTS) * RANKS_PER_NODE):
            text = f"{host} solved rank {rank}\n" if rank in own else f"{host} stale {rank}\n"
            write(c.case_on(host) / f"processor{rank}" / "100" / "U", text * 100)


def test_seven_steps(cluster):
    c = cluster
    # 1: shared -> head NVMe
    out = c.run_on("head", "stage-in", c.shared, c.case).stdout
    assert len(rsync_lines(out)) == 1
    assert tree_digest(c.case_on("head"), skip=[".nvme-stage"]) == tree_digest(c.shared)
    assert (c.case_on("head") / ".nvme-stage" / "stage-in.done").is_file()

    # 2, then 3: head -> n1, n2 in parallel, byte-identical
    decompose_on_head(c)
    out = c.run_on("head", "fan-out", c.case, "n1", "n2").stdout
    lines = rsync_lines(out)
    assert len(lines) == 2 and any("n1:" in s for s in lines) and any("n2:" in s for s in lines)
    head_tree = tree_digest(c.case_on("head"), skip=[".nvme-stage"])
    assert len(head_tree) == 5 + 2 * 6
    for host in ("n1", "n2"):
        assert tree_digest(c.case_on(host)) == head_tree, host
        assert not (c.case_on(host) / ".nvme-stage").exists()
        assert (c.case_on("head") / ".nvme-stage" / f"fan-out.{host}.done").is_file()

    # 4, 5, then 6: each node sends back only its own processor dirs
    solve_everywhere(c)
    head_before = tree_digest(c.case_on("head"), skip=[".nvme-stage"])
    for host in ("n1", "n2"):
        out = c.run_on(host, "gather", c.case, "head", *LAYOUT).stdout
        assert len(rsync_lines(out)) == 1
    after = tree_digest(c.case_on("head"), skip=[".nvme-stage"])
    n1, n2 = tree_digest(c.case_on("n1")), tree_digest(c.case_on("n2"))
    for rel, digest in after.items():
        rank = int(rel.split("/")[0].removeprefix("processor")) if rel.startswith("processor") else None
        if rank in (2, 3):
            assert digest == n1[rel], rel
        elif rank in (4, 5):
            assert digest == n2[rel], rel
        else:
            assert digest == head_before[rel], rel     # head's own ranks and case files untouched
    assert (c.case_on("head") / "processor4" / "100" / "U").read_text().startswith("n2 solved")
    assert (c.case_on("head") / "processor0" / "100" / "U").read_text().startswith("head solved")
    assert (c.case_on("n1") / ".nvme-stage" / "gather.done").is_file()

    # 7: post-processing results only, no processor dirs, no markers
    write(c.case_on("head") / "postProcessing" / "forceCoeffs" / "0" / "coefficient.dat",
          "# Time Cd Cl\n100 0.41 0.07\n")
    write(c.case_on("head") / "100" / "U", "reconstructed\n")
    c.run_on("head", "stage-out", c.case, c.shared)
    assert not list(c.shared.glob("processor*"))
    assert (c.shared / "postProcessing" / "forceCoeffs" / "0" / "coefficient.dat").is_file()
    assert sorted(p.name for p in (c.shared / ".nvme-stage").iterdir()) == ["stage-out.done"]
    expected = tree_digest(c.case_on("head"), skip=[".nvme-stage"] + [f"processor{r}" for r in range(6)])
    assert tree_digest(c.shared, skip=[".nvme-stage"]) == expected

    # every step is idempotent: a second round changes nothing
    c.run_on("head", "fan-out", c.case, "n1", "n2")
    c.run_on("head", "stage-out", c.case, c.shared)
    assert tree_digest(c.shared, skip=[".nvme-stage"]) == expected


def test_collect_pulls_only_each_hosts_ranks(cluster):
    c = cluster
    c.run_on("head", "stage-in", c.shared, c.case)
    decompose_on_head(c)
    c.run_on("head", "fan-out", c.case, "n1", "n2")
    solve_everywhere(c)
    out = c.run_on("head", "collect", c.case, "n1", "n2", *LAYOUT).stdout
    assert len(rsync_lines(out)) == 2
    for rank in range(6):
        owner = HOSTS[rank // RANKS_PER_NODE]
        text = (c.case_on("head") / f"processor{rank}" / "100" / "U").read_text()
        assert text.startswith(f"{owner} solved rank {rank}"), (rank, text[:30])


def test_layout_from_slurm(cluster, tmp_path):
    scontrol = tmp_path / "scontrol"
    scontrol.write_text('#!/bin/sh\n[ "$1 $2 $3" = "show hostnames head,n[1-2]" ] && '
                        'printf "head\\nn1\\nn2\\n"\n')
    scontrol.chmod(0o755)
    env = dict(cluster.env, NVME_STAGE_SCONTROL=str(scontrol), SLURM_JOB_NODELIST="head,n[1-2]",
               SLURM_TASKS_PER_NODE="36(x2),32", SLURMD_NODENAME="n2")
    run = lambda *a: subprocess.run([TOOL, *a], capture_output=True, text=True, env=env)  # noqa: E731
    assert run("hosts").stdout.split() == list(HOSTS)
    dirs = run("processors").stdout.split()
    assert dirs[0] == "processor72" and dirs[-1] == "processor103" and len(dirs) == 32
    assert run("processors", "--ranks-of", "n1").stdout.split()[0] == "processor36"
    # head runs fan-out with no hosts: every other node of the job
    env["SLURMD_NODENAME"] = "head"
    cluster.case_on("head").mkdir(parents=True)
    dry = run("--dry-run", "fan-out", str(cluster.case_on("head")))
    assert dry.returncode == 0, dry.stderr
    targets = sorted(s.rsplit(" ", 1)[1].split(":")[0] for s in rsync_lines(dry.stdout))
    assert targets == ["n1", "n2"]
    bad = run("processors", "--tasks-per-node", "36(x2)")
    assert bad.returncode == 2 and "host list has 3" in bad.stderr


def _wait_for_partial(dest: pathlib.Path, name: str, timeout: float = 600.0):
    """Until rsync's temporary copy of `name` has some bytes in it (the timeout guards a
    hang only: it is met as soon as the copy starts)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for p in dest.glob(f".{name}.*"):
            try:
                if p.stat().st_size > 1 << 20:
                    return
            except FileNotFoundError:
                pass
        time.sleep(0.05)
    raise AssertionError("transfer never started")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_interrupted_fan_out_reruns_to_identical(cluster, sig):
    c = cluster
    c.run_on("head", "stage-in", c.shared, c.case)
    big = c.case_on("head") / "constant" / "polyMesh" / "faces"
    big.write_bytes(os.urandom(24 << 20))
    slow = dict(c.env, NVME_STAGE_RSYNC_OPTS="--bwlimit=2M")
    proc = subprocess.Popen(c.command_on("head", TOOL, "fan-out", c.case, "n1"), env=slow,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    dest = c.case_on("n1") / "constant" / "polyMesh"
    _wait_for_partial(dest, "faces")
    # stopped mid-copy, the step cannot finish the copy however slowly this test gets to
    # the signal; a stopped process gets SIGKILL at once, SIGTERM on SIGCONT, before it
    # runs another instruction
    os.killpg(proc.pid, signal.SIGSTOP)
    os.killpg(proc.pid, sig)    # as scancel does: the whole step
    if sig != signal.SIGKILL:
        os.killpg(proc.pid, signal.SIGCONT)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode != 0
    if sig == signal.SIGTERM:
        assert "interrupted by SIGTERM" in err
    assert not (c.case_on("head") / ".nvme-stage" / "fan-out.n1.done").exists()
    done = dest / "faces"
    assert not done.exists() or done.read_bytes() != big.read_bytes()

    # SIGKILL leaves rsync's temporary file behind; --delete clears it
    rerun = ["fan-out", c.case, "n1"] + (["--delete"] if sig == signal.SIGKILL else [])
    c.run_on("head", *rerun)
    assert tree_digest(c.case_on("n1")) == tree_digest(c.case_on("head"), skip=[".nvme-stage"])
    leftovers = [p for p in c.case_on("n1").rglob(".*") if p.name != ".nvme-stage"]
    assert leftovers == []
    assert (c.case_on("head") / ".nvme-stage" / "fan-out.n1.done").is_file()


def test_fan_out_own_ranks_sends_each_node_only_its_processor_dirs(cluster):
    c = cluster
    c.run_on("head", "stage-in", c.shared, c.case)
    decompose_on_head(c)
    out = c.run_on("head", "fan-out", "--own-ranks", c.case, "n1", "n2", *LAYOUT).stdout
    assert len(rsync_lines(out)) == 2
    head = tree_digest(c.case_on("head"), skip=[".nvme-stage"])
    for index, host in enumerate(("n1", "n2")):
        own = {f"processor{r}" for r in range((index + 1) * RANKS_PER_NODE,
                                              (index + 2) * RANKS_PER_NODE)}
        node = tree_digest(c.case_on(host))
        held = {rel.split("/")[0] for rel in node if rel.startswith("processor")}
        assert held == own, host
        # the rest of the case and its own dirs as the head has them, nothing else
        assert node == {rel: d for rel, d in head.items()
                        if not rel.startswith("processor") or rel.split("/")[0] in own}
    bad = c.run_on("head", "fan-out", "--own-ranks", "--processors", "0-1", c.case, "n1",
                   check=False)
    assert bad.returncode == 2 and "--own-ranks splits by the job's layout" in bad.stderr
