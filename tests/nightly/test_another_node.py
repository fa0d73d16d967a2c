"""Figures are judged on the node that made them (issue 38), shown on a real second node.

An XFS file system on a loop device of this machine, its reads and writes throttled by the
cgroup v1 blkio controller for every process of the runs, is the scratch disk of "another
node". Its identity (iostack.regression.node: host, CPU model, machine id and the scratch
disk under the checks' stage) differs from that of the node the committed references were
recorded on because its scratch disk does: IOSTACK_NODE is not set.

`local` is deployed from source into a root on that disk: the deploy passes, and its first
nightly (FdbThroughputCheck on the release's FDB) is judged only by the figure that transfers
between nodes (FDB's write ratio, the committed node's value) and says in one line that the
node needs record-baseline. Its own baseline is then recorded, into a references directory
of the test's own: on the same disk the next nightly passes, judged by it; on a disk eight
times slower FDB's MiB/s falls out of its band, said as unconfirmed on the first night and
failing the nightly on the second (the nightly's two-night rule for time figures). The
committed references are left as they were.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import pathlib
import shutil
import signal
import subprocess
import time

import pytest

from iostack.core import paths
from iostack.regression import node as node_id
from iostack.regression import references, results

IOSTACK = str(paths.REPO / "bin" / "iostack")
BLKIO = pathlib.Path("/sys/fs/cgroup/blkio")
#: sparse: the deployment (~100 MB), the build's stage and the failed nights' kept stages
DISK_BYTES = 12 * 2**30
MIB = 2**20
#: the node's disk: slower than this machine's (FDB here writes ~650 MiB/s unthrottled)
THROTTLE_MIB = 256
#: the same disk, degraded: eight times slower
DEGRADED_MIB = THROTTLE_MIB // 8
#: the band record-baseline is given by hand (--lower/--upper): wide enough that the same
#: throttled disk stays inside it, and the degraded one cannot (checked before it is used);
#: above, no figure on either disk comes near it (the ratio rises as both sides slow down)
BAND, UPPER = 0.5, 3.0
CHECK = "FdbThroughputCheck"
VARIANT = "buffer_mib=64,durability=sync-flush,path=message,size=small"
# the release's FDB (`stack`), one variant, one pass, no retry: a retry would hide the
# failing night the two-night rule counts
ONE_VARIANT = ["-n", f"{CHECK}%size=small%durability=sync-flush%path=message%buffer_mib=64",
               "-S", "valid_prog_environs=stack", "-S", f"{CHECK}.repeats=1",
               "--max-retries=0"]
PARTITION = "local:default"
ABSOLUTE = ("fdb_write_bw", "fdb_cpu_per_gib")

pytestmark = pytest.mark.usefixtures("loop_devices")


def sh(*args) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, check=True)


def digest(directory: pathlib.Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


@dataclasses.dataclass
class Node:
    mount: pathlib.Path
    device: str
    cgroup: pathlib.Path
    #: the node's references: a copy of the committed ones, where its baseline is recorded
    references: pathlib.Path
    #: the committed references' files and sha256 before anything ran
    committed: dict[str, str]

    @property
    def root(self) -> pathlib.Path:
        return self.mount / "root"

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != node_id.NODE_ENV}
        return {**env, "IOSTACK_RFM_REFERENCES": str(self.references)}

    def throttle(self, mib_per_s: int) -> None:
        rdev = os.stat(self.device).st_rdev
        rule = f"{os.major(rdev)}:{os.minor(rdev)} {mib_per_s * MIB}"
        for side in ("write", "read"):
            (self.cgroup / f"blkio.throttle.{side}_bps_device").write_text(rule)

    def enter(self) -> None:
        """In the child, before it runs iostack: it and all it starts are throttled."""
        (self.cgroup / "cgroup.procs").write_text(str(os.getpid()))


def iostack(node: Node, *args, timeout=3 * 3600) -> subprocess.CompletedProcess:
    start = time.monotonic()
    p = subprocess.run([IOSTACK, *map(str, args)], capture_output=True, text=True,
                       env=node.env, timeout=timeout, preexec_fn=node.enter)
    p.seconds = time.monotonic() - start
    print(f"$ iostack {' '.join(map(str, args))}  # rc {p.returncode}, {p.seconds:.0f} s\n"
          f"{p.stdout[-4000:]}{p.stderr[-3000:]}")
    return p


def _empty_and_remove(cgroup: pathlib.Path) -> None:
    # a run ended by its timeout leaves its children here, holding the mount: they are the
    # test's own, so they go by pid
    for _ in range(100):
        pids = (cgroup / "cgroup.procs").read_text().split()
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        time.sleep(0.1)
    cgroup.rmdir()


def _unmount(mount: pathlib.Path) -> None:
    for _ in range(20):
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode == 0:
            return
        time.sleep(0.5)     # a process killed just now may still hold it
    sh("umount", mount)


@pytest.fixture(scope="module")
def another_node(tmp_path_factory):
    """The second node's scratch disk, mounted, and the cgroup that throttles it; unmounted,
    detached and removed afterwards, whatever happened."""
    missing = [what for what, ok in (
        ("root", os.geteuid() == 0), ("/dev/loop-control", os.path.exists("/dev/loop-control")),
        ("losetup", shutil.which("losetup")), ("mkfs.xfs", shutil.which("mkfs.xfs")),
        (f"the cgroup v1 blkio controller at {BLKIO}",
         (BLKIO / "blkio.throttle.write_bps_device").exists())) if not ok]
    if missing:
        pytest.fail(f"another node is played with a throttled loop device: needs {', '.join(missing)}")
    top = tmp_path_factory.mktemp("another-node")
    committed = digest(references.REFERENCES_DIR)
    refs = top / "references"
    shutil.copytree(references.REFERENCES_DIR, refs)
    with contextlib.ExitStack() as undo:
        image = top / "scratch.img"
        with open(image, "wb") as f:
            f.truncate(DISK_BYTES)
        undo.callback(image.unlink, missing_ok=True)
        device = sh("losetup", "--find", "--show", image).stdout.strip()
        undo.callback(sh, "losetup", "-d", device)
        sh("mkfs.xfs", "-q", device)
        mount = top / "scratch"
        mount.mkdir()
        sh("mount", device, mount)
        undo.callback(_unmount, mount)
        cgroup = BLKIO / f"iostack-another-node-{os.getpid()}"
        cgroup.mkdir()
        undo.callback(_empty_and_remove, cgroup)
        node = Node(mount, device, cgroup, refs, committed)
        node.throttle(THROTTLE_MIB)
        yield node


def report_of(p) -> dict:
    """The run's own report (the nightly names it), not the newest in the directory."""
    named = [line.removeprefix("iostack: ReFrame report: ") for line in p.stdout.splitlines()
             if line.startswith("iostack: ReFrame report: ")]
    assert named, p.stdout[-3000:]
    return results.read_report(pathlib.Path(named[-1]))


def nightly(node: Node):
    """A nightly of the one FdbThroughputCheck variant on the node: (run, its test case)."""
    p = iostack(node, "nightly", "--site", "local", "--root", node.root, "--", *ONE_VARIANT)
    (tc,) = [tc for tc in results.last_attempts(report_of(p)).values()
             if results.check_of(tc) == CHECK]
    return p, tc


def section(directory: pathlib.Path) -> dict:
    return references.load(directory / "fdb_throughput.yaml")[CHECK]


@pytest.fixture(scope="module")
def deployed(another_node, timings):
    p = iostack(another_node, "deploy", "--site", "local", "--root", another_node.root)
    timings["another node: deploy local from source (throttled XFS on a loop device)"] = \
        p.seconds
    return p


@pytest.fixture(scope="module")
def first_nightly(another_node, deployed):
    assert deployed.returncode == 0, (deployed.stdout + deployed.stderr)[-4000:]
    return nightly(another_node)


def test_its_first_deploy_passes_and_becomes_current(another_node, deployed):
    assert deployed.returncode == 0, (deployed.stdout + deployed.stderr)[-4000:]
    p = iostack(another_node, "releases", "--site", "local", "--root", another_node.root)
    releases = [line for line in p.stdout.splitlines() if line.startswith("*")]
    assert len(releases) == 1 and releases[0].rstrip().endswith("current"), p.stdout
    assert "passed" in releases[0]


def test_its_first_nightly_is_judged_by_what_transfers_and_names_record_baseline(
        another_node, first_nightly):
    p, tc = first_nightly
    assert tc["result"] == "pass" and p.returncode == 0, tc.get("fail_reason")
    key = tc["node_key"]
    # another node because its scratch disk is another (the loop device's XFS under the
    # checks' stage), not because a test named it
    assert key == node_id.this_node(another_node.mount)[0]
    assert tc["node_identity"]["scratch_device"].startswith(
        pathlib.Path(another_node.device).name + " ")
    committed = section(references.REFERENCES_DIR)
    recorded_on = {references.node_of(k) for k in committed["references"]
                   if references.split_key(k) == (PARTITION, "stack")}
    assert recorded_on and None not in recorded_on and key not in recorded_on
    # the committed node's ratio judges it (it transfers); the absolute figures are shown,
    # not judged (ReFrame's "no reference": 0, unbounded)
    transferred = references.entries(committed, PARTITION, VARIANT, "stack", key)
    assert set(transferred) & set(references.gated_variables(committed)) == {"fdb_write_ratio"}
    values = results.perf_values(tc)
    assert values["fdb_write_ratio"].ref == pytest.approx(
        transferred["fdb_write_ratio"]["value"])
    for var in ABSOLUTE:
        assert (values[var].ref, values[var].lower, values[var].upper) == (0, None, None), var
    notice = [line for line in p.stdout.splitlines() if line.startswith("iostack: node ")]
    assert notice == [f"iostack: node {key} has no baseline of its own ({CHECK}): only "
                      "figures that transfer between nodes were judged; after a passing "
                      "nightly, `bin/iostack record-baseline --site local --system local` "
                      "records its own"]


def test_once_its_baseline_is_recorded_its_absolute_figures_are_gated(another_node,
                                                                      first_nightly):
    node = another_node
    _, first = first_nightly
    key = first["node_key"]
    p = iostack(node, "record-baseline", "--site", "local", "--root", node.root,
                "--check", CHECK, "--lower", BAND, "--upper", UPPER)
    # record-baseline refuses a session of uncommitted code: this tier runs a clean checkout
    assert p.returncode == 0, (p.stdout + p.stderr)[-2000:]
    own = section(node.references)["references"][references.key(PARTITION, "stack", key)]
    recorded = own[VARIANT]["fdb_write_bw"]
    assert recorded["value"] == pytest.approx(results.perf_values(first)["fdb_write_bw"].value)
    assert recorded["lower"] == -BAND and recorded["provenance"]["node"] == \
        first["node_identity"]

    # the same disk: judged by its own figures, and inside them
    p, tc = nightly(node)
    assert tc["result"] == "pass" and p.returncode == 0, tc.get("fail_reason")
    bw = results.perf_values(tc)["fdb_write_bw"]
    assert (bw.ref, bw.lower) == (pytest.approx(recorded["value"]), -BAND)
    assert not [line for line in p.stdout.splitlines() if "has no baseline of its own" in line]

    # the disk degraded: FDB's fdatasync'd writes cannot pass DEGRADED_MIB, below the band
    assert recorded["value"] * (1 - BAND) > DEGRADED_MIB
    node.throttle(DEGRADED_MIB)
    p, tc = nightly(node)
    bw = results.perf_values(tc)["fdb_write_bw"]
    assert tc["result"] == "fail" and tc["fail_phase"] == "performance" and \
        bw.result == "fail", tc.get("fail_reason")
    # a time figure's first night outside: said, and confirmed or not by the next
    unconfirmed = [line for line in p.stdout.splitlines()
                   if line.startswith("iostack: unconfirmed: ") and " fdb_write_bw=" in line]
    assert len(unconfirmed) == 1 and p.returncode == 0, p.stdout[-3000:]

    p, tc = nightly(node)
    bw = results.perf_values(tc)["fdb_write_bw"]
    assert tc["result"] == "fail" and tc["fail_phase"] == "performance" and bw.result == "fail"
    assert "fdb_write_bw" in tc["fail_reason"] and p.returncode == 1, tc.get("fail_reason")
    assert not [line for line in p.stdout.splitlines()
                if line.startswith("iostack: unconfirmed: ") and " fdb_write_bw=" in line]


def test_the_committed_references_are_left_as_they_were(another_node, first_nightly):
    assert digest(references.REFERENCES_DIR) == another_node.committed
    status = subprocess.run(["git", "status", "--porcelain", "--", str(references.REFERENCES_DIR)],
                            capture_output=True, text=True, cwd=paths.REPO)
    assert status.returncode == 0 and status.stdout == ""
    # the node's own copy: only its own key added, every other node's entry as committed
    key = first_nightly[1]["node_key"]
    committed, own = section(references.REFERENCES_DIR), section(another_node.references)
    assert {k: v for k, v in own["references"].items() if references.node_of(k) != key} == \
        committed["references"]
