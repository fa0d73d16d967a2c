"""A throwaway single-node Slurm cluster on this node, for the `local-slurm` ReFrame system.

CI has no Slurm cluster, so the tests start one here: munged, slurmctld and slurmd, all
as root, with every file (config, munge key and socket, state, spool, logs) under one
state directory and ports picked free, so it touches nothing of a Slurm the node may
already run. There is no accounting database: ReFrame's `squeue` scheduler, not `slurm`
(which needs sacct), talks to it.

    from iostack_testbed.slurm import LocalSlurm
    with LocalSlurm(state_dir) as cluster:      # started, node idle
        subprocess.run(["sbatch", ...], env={**os.environ, **cluster.env()})

or from the shell, around one command (the nightly on `local-slurm`):

    iostack-testbed run slurm -- bin/iostack nightly --system local-slurm

or by hand:

    iostack-testbed slurm start --state-dir /tmp/slurm   # prints: export SLURM_CONF=...
    iostack-testbed slurm stop --state-dir /tmp/slurm

Needs root (slurmd launches jobs as their user) and the Debian packages slurm-wlm and
munge. Slurm 22.05 checks the node's hardware against slurm.conf: a node configured with
more CPUs or memory than `slurmd -C` reports is drained, so the node line is taken from
`slurmd -C` (CPUs, sockets, cores, threads, RealMemory) as it is.
"""
from __future__ import annotations

import json
import os
import pathlib
import secrets
import shutil
import signal
import socket
import subprocess
import time

from iostack_testbed.errors import TestbedError

PARTITION = "iostack"
CLUSTER = "iostack"
# mpi.conf, read from slurm.conf's directory by slurmd and handed to every slurmstepd
MPI_CONF = "PMIxDirectConn=true\nPMIxCollFence=ring\n"
# AF_UNIX socket paths are limited to 108 bytes (sun_path), NUL included.
MAX_SOCKET_PATH = 107
DAEMONS = ("munged", "slurmctld", "slurmd")


class SlurmUnavailable(TestbedError):
    """This node cannot run the local cluster (not root, packages missing)."""


class SlurmStartError(TestbedError):
    """A daemon did not come up; the message carries the tails of its logs."""


def unavailable_reason() -> str | None:
    """Why a local cluster cannot start here, or None if it can."""
    if os.geteuid() != 0:
        return "the local Slurm cluster needs root (slurmd runs jobs as their owner)"
    missing = [p for p in ("munged", "slurmctld", "slurmd", "sinfo", "sbatch", "squeue")
               if not shutil.which(p, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")]
    if missing:
        return (f"Slurm/munge not installed ({', '.join(missing)} missing): "
                "apt-get install slurm-wlm munge")
    return None


def _which(prog: str) -> str:
    found = shutil.which(prog, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if not found:
        raise SlurmUnavailable(f"{prog} not found: apt-get install slurm-wlm munge")
    return found


def node_hardware() -> dict[str, str]:
    """The node line `slurmd -C` prints (NodeName, CPUs, ..., RealMemory), as a dict."""
    out = subprocess.run([_which("slurmd"), "-C"], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    first = next(line for line in out.splitlines() if line.startswith("NodeName="))
    return dict(field.split("=", 1) for field in first.split())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_conf(state: pathlib.Path, hardware: dict[str, str], munge_socket: pathlib.Path,
               ctld_port: int, slurmd_port: int) -> str:
    """slurm.conf of the single-node cluster: this node, as `slurmd -C` describes it."""
    node = hardware["NodeName"]
    return cluster_conf(state, munge_socket, controller=f"{node}(127.0.0.1)",
                        ctld_port=ctld_port, slurmd_port=slurmd_port,
                        nodes=[node_line(hardware, node, "127.0.0.1")],
                        partitions={PARTITION: [node]})


def node_line(hardware: dict[str, str], name: str, address: str) -> str:
    """A NodeName line with `slurmd -C`'s CPUs, sockets, cores, threads and memory."""
    described = " ".join(f"{k}={v}" for k, v in hardware.items() if k != "NodeName")
    return f"NodeName={name} {described} NodeAddr={address} State=UNKNOWN"


def cluster_conf(state: pathlib.Path, munge_socket: pathlib.Path, *, controller: str,
                 ctld_port: int, slurmd_port: int, nodes: list[str],
                 partitions: dict[str, list[str]], per_node: bool = False,
                 task_plugin: str = "task/none", extra: tuple[str, ...] = ()) -> str:
    """slurm.conf for a throwaway cluster rooted in `state`: `controller` is
    SlurmctldHost's value, `nodes` NodeName lines, `partitions` node names by partition
    (the first is the default). `per_node` gives every slurmd its own spool, pid and log
    file (%n: the node's name), for several slurmds sharing the state directory.
    `task_plugin`: task/affinity binds each task to its CPUs (without cgroups)."""
    slurmd = "-%n" if per_node else ""
    partition_lines = [f"PartitionName={name} Nodes={','.join(members)}"
                       f"{' Default=YES' if i == 0 else ''} MaxTime=INFINITE State=UP"
                       for i, (name, members) in enumerate(partitions.items())]
    return f"""\
# Generated by iostack for a throwaway cluster; do not edit.
ClusterName={CLUSTER}
SlurmctldHost={controller}
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={state}/ctld
SlurmdSpoolDir={state}/spool{'/%n' if per_node else ''}
SlurmctldPidFile={state}/run/slurmctld.pid
SlurmdPidFile={state}/run/slurmd{slurmd}.pid
SlurmctldLogFile={state}/log/slurmctld.log
SlurmdLogFile={state}/log/slurmd{slurmd}.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups in CI containers: track job processes through /proc.
ProctrackType=proctrack/linuxproc
TaskPlugin={task_plugin}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# Debian's Open MPI 4.1 is started by srun through PMIx: plain `srun` starts every rank
MpiDefault=pmix
# No accounting database: ReFrame uses its squeue scheduler.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
# Keep finished jobs visible to squeue long enough for ReFrame to see their end.
MinJobAge=600
MailProg=/bin/true
PlugStackConfig={state}/etc/plugstack.conf
""" + "".join(line + "\n" for line in [*extra, *nodes, *partition_lines])


class LocalSlurm:
    """munged + slurmctld + slurmd for this node, rooted in `state_dir`."""

    def __init__(self, state_dir, timeout: float = 90.0):
        self.state = pathlib.Path(state_dir).resolve()
        self.timeout = timeout
        self.conf = self.state / "etc" / "slurm.conf"
        self.procs: dict[str, subprocess.Popen] = {}
        self.partitions = [PARTITION]

    # paths ---------------------------------------------------------------------------
    @property
    def munge_dir(self) -> pathlib.Path:
        return self.state / "munge"

    @property
    def munge_socket(self) -> pathlib.Path:
        return self.munge_dir / "munge.socket"

    @property
    def munge_key(self) -> pathlib.Path:
        return self.state / "munge-key" / "munge.key"

    def log(self, daemon: str) -> pathlib.Path:
        return self.state / "log" / f"{daemon}.log"

    def env(self) -> dict[str, str]:
        """What a Slurm client (sbatch, squeue, ReFrame) needs to reach this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    # set-up --------------------------------------------------------------------------
    def step_socket(self) -> pathlib.Path:
        """The longest socket path slurmstepd makes: <spool>/<node>_<job>.<step> (a batch
        step's number has 10 digits; a test bed's job ids, from 1, have at most 5)."""
        node = socket.gethostname().split(".")[0]   # slurmd -C's NodeName
        return self.state / "spool" / f"{node}_{'9' * 5}.4294967291"

    def prepare_state(self) -> None:
        """The state directory's tree, the munge key and an empty plug-stack file."""
        # a socket path beyond the limit fails late and quietly: munged does not start, or
        # slurmstepd dies and slurmctld requeues the job for ever
        for what, sock in (("munge's", self.munge_socket), ("slurmstepd's", self.step_socket())):
            if len(str(sock)) > MAX_SOCKET_PATH:
                raise SlurmStartError(
                    f"state directory {self.state} is too long for {what} socket paths "
                    f"({len(str(sock))} > {MAX_SOCKET_PATH} bytes): use a shorter one")
        for sub in ("etc", "ctld", "spool", "run", "log"):
            (self.state / sub).mkdir(parents=True, exist_ok=True)
        # munged wants its socket directory searchable by all (jobs run as any user) but
        # writable only by root, and its key readable only by root.
        self.munge_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.munge_dir, 0o755)
        self.munge_key.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(self.munge_key.parent, 0o700)
        key = self.munge_key
        if not key.exists():
            key.write_bytes(secrets.token_bytes(128))
            os.chmod(key, 0o400)
        # no SPANK plugins: an empty plug-stack file instead of the node's own
        (self.state / "etc" / "plugstack.conf").write_text("")
        # Every PMIx fence a ring between the step daemons, over their direct connections
        # (Slurm's default). Slurm 22.05 fences without data by a tree (and all of them,
        # without direct connections), and here a tree never left its node: each step
        # daemon was the root of a tree without children (its debug log). So MPI_Init's
        # last fence let a rank send before a slower node's rank had its PML, and that
        # rank died of SIGSEGV (ob1's match callback, still NULL, called by mca_btl_tcp):
        # 10 of 300 six-rank steps beside three busy loops. test_cluster.py times both
        # kinds of fence.
        (self.state / "etc" / "mpi.conf").write_text(MPI_CONF)

    def write_config(self) -> pathlib.Path:
        self.prepare_state()
        hardware = node_hardware()
        self.conf.write_text(slurm_conf(self.state, hardware, self.munge_socket,
                                        free_port(), free_port()))
        (self.state / "cluster.json").write_text(json.dumps(
            {"node": hardware["NodeName"], "partition": PARTITION, "conf": str(self.conf)}))
        return self.conf

    # daemons -------------------------------------------------------------------------
    def _spawn(self, name: str, cmd: list[str]):
        out = open(self.state / "log" / f"{name}.console", "ab")
        env = dict(os.environ, SLURM_CONF=str(self.conf))
        self.procs[name] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=env,
                                            start_new_session=True)
        out.close()
        (self.state / "run" / f"{name}.daemon-pid").write_text(str(self.procs[name].pid))

    def _wait(self, what: str, ready, daemons) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for name in daemons:
                proc = self.procs.get(name)
                if proc is not None and proc.poll() is not None:
                    raise SlurmStartError(f"{name} exited with code {proc.returncode} "
                                          f"while waiting for {what}\n{self.diagnostics()}")
            if ready():
                return
            time.sleep(0.5)
        raise SlurmStartError(f"timed out after {self.timeout:.0f} s waiting for {what}\n"
                              f"{self.diagnostics()}")

    def _munge_ok(self) -> bool:
        munge, unmunge = shutil.which("munge"), shutil.which("unmunge")
        if not (munge and unmunge):
            return self.munge_socket.exists()
        cred = subprocess.run([munge, "-n", "-S", str(self.munge_socket)],
                              capture_output=True, timeout=10)
        if cred.returncode != 0:
            return False
        return subprocess.run([unmunge, "-S", str(self.munge_socket)], input=cred.stdout,
                              capture_output=True, timeout=10).returncode == 0

    def node_state(self) -> str:
        p = subprocess.run([_which("sinfo"), "-h", "-N", "-o", "%T"], capture_output=True,
                           text=True, env=dict(os.environ, **self.env()), timeout=15)
        return p.stdout.strip() if p.returncode == 0 else ""

    def start_munged(self) -> None:
        self._spawn("munged", [_which("munged"), "--foreground", "--force",
                               f"--socket={self.munge_socket}",
                               f"--key-file={self.munge_key}",
                               f"--pid-file={self.munge_dir / 'munged.pid'}",
                               f"--seed-file={self.munge_dir / 'munged.seed'}",
                               f"--log-file={self.log('munged')}"])
        self._wait("munged to answer", self._munge_ok, ["munged"])

    def start(self) -> "LocalSlurm":
        reason = unavailable_reason()
        if reason:
            raise SlurmUnavailable(reason)
        self.write_config()
        try:
            self.start_munged()
            # -i: ignore state left by an earlier run in the same directory
            self._spawn("slurmctld", [_which("slurmctld"), "-D", "-i", "-f", str(self.conf)])
            self._spawn("slurmd", [_which("slurmd"), "-D", "-f", str(self.conf)])
            self._wait(f"node to be idle in partition {PARTITION} (sinfo)",
                       lambda: self.node_state() == "idle", DAEMONS)
        except BaseException:
            self.stop()
            raise
        return self

    def cancel_jobs(self, timeout: float = 30.0) -> None:
        """Cancel the cluster's jobs and wait for them to go: with proctrack/linuxproc a
        job's processes outlive a stopped slurmd."""
        env = dict(os.environ, **self.env())
        try:
            subprocess.run([_which("scancel"), "--partition", ",".join(self.partitions)], env=env,
                           capture_output=True, timeout=15)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                left = subprocess.run([_which("squeue"), "-h", "-t", "PD,R,CG,S", "-o", "%i"],
                                      env=env, capture_output=True, text=True, timeout=15)
                if left.returncode != 0 or not left.stdout.strip():
                    return
                time.sleep(1)
        except (subprocess.TimeoutExpired, SlurmUnavailable):
            pass

    def stop(self) -> None:
        """Cancel the jobs, then stop the daemons this object started (TERM, then KILL
        after 15 s)."""
        ctld = self.procs.get("slurmctld")
        if ctld is not None and ctld.poll() is None:
            self.cancel_jobs()
        for name in reversed(DAEMONS):
            proc = self.procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

    def daemon_logs(self) -> list[str]:
        """Names of the daemons whose logs `diagnostics` shows."""
        return ["slurmctld", "slurmd", "munged"]

    def diagnostics(self, lines: int = 25) -> str:
        parts = []
        for name in self.daemon_logs():
            for path in (self.log(name), self.state / "log" / f"{name}.console"):
                if path.exists() and path.stat().st_size:
                    tail = path.read_text(errors="replace").splitlines()[-lines:]
                    parts.append(f"--- last {len(tail)} lines of {path}\n" + "\n".join(tail))
        return "\n".join(parts) or f"(no daemon logs under {self.state / 'log'})"

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


def _stop_by_pidfiles(state: pathlib.Path) -> None:
    """`stop` from another process: signal the daemons `start` recorded, newest first."""
    for name in reversed(DAEMONS):
        pidfile = state / "run" / f"{name}.daemon-pid"
        if not pidfile.exists():
            continue
        pid = int(pidfile.read_text())
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        for _ in range(30):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.5)
        pidfile.unlink()


def run(action: str, state_dir: pathlib.Path, timeout: float) -> int:
    """`iostack-testbed slurm start|stop|config`: the daemons outlive `start`; `stop`, from
    another process, finds them by their pid files."""
    cluster = LocalSlurm(state_dir, timeout=timeout)
    if action == "config":
        print(cluster.write_config())
    elif action == "start":
        cluster.start()
        cluster.procs.clear()
        print(f"export SLURM_CONF={cluster.conf}")
    else:
        if cluster.conf.is_file():
            cluster.cancel_jobs()
        _stop_by_pidfiles(state_dir.resolve())
    return 0
