"""bin/iostack nightly's verdict is true and its operations are bounded, for real (ReFrame
4.10, its sqlite results DB, loop-mounted and read-only file systems), and an operator's
mistake is one line, never a traceback (issue 12)."""
import json
import os
import pathlib
import re
import shutil
import sqlite3
import signal
import subprocess
import time

import pytest

from iostack.core import filesystems, paths, process
from iostack.regression import nightly, reframe, results
from support import account, targets

pytestmark = pytest.mark.skipif(
    not all(shutil.which(p) for p in ("fdb-write", "fdb-read", "grib_set")),
    reason="FDB tools (fdb5) or ecCodes tools not installed")

IOSTACK = paths.REPO / "bin" / "iostack"
#: one quick passing case, on Debian's packages only: the `stack` environment needs a
#: deployed Spack stack (`-p builtin` would still build the check's fixture in `stack`)
BUILTIN = ["-S", "valid_prog_environs=builtin", "--max-retries=0"]
QUICK = [*BUILTIN, "-n", "FdbBitIdentityCheck%grib_input=synthetic%scenario=archive"]
#: one quick failing case: the negative control flips a message that does not exist
FAILING = [*BUILTIN, "-n", "FdbBitIdentityCheck%grib_input=synthetic%scenario=flip-one-bit",
           "-S", "FdbBitIdentityCheck.flipped_message=9999"]


def iostack(*args, env=None, timeout=900, repo=paths.REPO):
    p = subprocess.run([str(repo / "bin" / "iostack"), *map(str, args)], capture_output=True,
                       text=True, env={**os.environ, "IOSTACK_VENV": str(targets.settings().venv), **(env or {})},
                       timeout=timeout)
    print(p.stdout[-5000:], p.stderr[-3000:])
    return p


def errors(p):
    return [line for line in (p.stdout + p.stderr).splitlines() if line.startswith("iostack: error:")]


def own_report(p) -> pathlib.Path:
    (path,) = re.findall(r"^iostack: ReFrame report: (\S+)$", p.stdout, re.M)
    return pathlib.Path(path)


# --- the verdict ----------------------------------------------------------------------

def truncated_db(path):
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE sessions(uuid TEXT PRIMARY KEY, json_blob TEXT)")
        db.executemany("INSERT INTO sessions VALUES(?, ?)", [(str(i), "x" * 4000) for i in range(50)])
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_an_unusable_results_db_fails_the_nightly_and_keeps_its_report(tmp_path, damage):
    """[issue 12] ReFrame warns "failed to store results in the database" and passes."""
    root = tmp_path / "root"
    db = root / "reframe" / "results.db"
    db.parent.mkdir(parents=True)
    {"garbage": lambda: db.write_bytes(os.urandom(8192)), "truncated": lambda: truncated_db(db),
     "empty": lambda: db.write_bytes(b"")}[damage]()
    account.give_tree(root)     # made here as root; the nightly runs as the service account
    p = iostack("nightly", "--root", root, "--", *QUICK)
    assert p.returncode == nightly.RC_NOT_STORED
    (line,) = errors(p)
    report = own_report(p)
    uuid = results.read_report(report)["session_info"]["uuid"]
    assert line.startswith(f"iostack: error: session {uuid} was NOT stored in the results DB {db} (")
    assert line.endswith(f"`bin/iostack store-report --site local --system local --root {root} {report}`")
    if damage != "garbage":
        return
    # the operator moves the damaged DB aside and stores the kept report
    db.rename(db.with_suffix(".damaged"))
    p = iostack("store-report", "--root", root, report)
    assert p.returncode == 0 and f"session {uuid} of {report} stored in {db}" in p.stdout
    stored = [s["session_info"]["uuid"] for s in results.stored_sessions(targets.of(root, system="local"))]
    assert stored == [uuid]
    p = iostack("store-report", "--root", root, report)
    assert p.returncode == 1 and errors(p) == [
        f"iostack: error: session {uuid} of {report} is already in the results DB {db}"]


@pytest.fixture(scope="module")
def repo_copy(tmp_path_factory):
    """The repository's files (tracked and new), copied: a place to break a site. Root's,
    as a checkout root runs must be (iostack.core.trust)."""
    dest = tmp_path_factory.mktemp("repo")
    if os.geteuid() == 0:
        os.chown(dest, 0, 0)
    dest.chmod(0o755)
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                           cwd=paths.REPO, capture_output=True, text=True, check=True).stdout
    for name in filter(None, files.split("\0")):
        src = paths.REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def test_a_check_that_does_not_load_fails_the_nightly_naming_it(repo_copy, tmp_path):
    """[issue 12] stack_smoke.py on an unparsable spack.lock vanished behind a warning."""
    lock = repo_copy / "spack-env" / "sites" / "local" / "spack.lock"
    good = lock.read_bytes()
    lock.write_text('{"roots": [')
    try:
        p = iostack("nightly", "--root", tmp_path, "--", *QUICK, repo=repo_copy)
    finally:
        lock.write_bytes(good)
    assert p.returncode == 2
    (line,) = errors(p)
    assert line.startswith("iostack: error: mode nightly must run StackSmokeCheck, which did not "
                           f"load (skipping test file '{repo_copy}/reframe-tests/checks/stack_smoke.py': ")
    assert "the checks each mode must run are listed in lib/iostack/regression/nightly.py MODES" in line
    assert " -r " not in p.stdout      # nothing was run


def test_an_unknown_system_and_mode_are_named(tmp_path):
    p = iostack("nightly", "--system", "locl", "--root", tmp_path)
    assert p.returncode == 2
    assert errors(p) == [
        "iostack: error: ReFrame system 'locl' is not one of site local's: "
        "reframe-tests/config/local.py defines the systems sites/local.yaml lists (local, "
        "local-cluster, local-slurm); nothing was run"]
    p = iostack("nightly", "--mode", "nighty", "--root", tmp_path)
    assert p.returncode == 2
    assert errors(p) == [
        "iostack: error: unknown mode 'nighty': modes are deploy, nightly, weekly, defined in "
        "reframe-tests/iostack_rfm/config.py `modes` (their checks and bounds: "
        "lib/iostack/regression/nightly.py MODES)"]


@pytest.mark.parametrize("mode", list(nightly.MODES))
def test_each_mode_must_run_exactly_the_checks_it_loads(tmp_path, mode):
    """MODES, the one list of what each mode must run, against the checks that exist."""
    listing = reframe.list_checks(targets.of(tmp_path, system="local"), mode)
    assert listing.rc == 0 and listing.skipped == [] and listing.error == ""
    assert listing.checks == nightly.MODES[mode].checks


# --- two runs, one root -------------------------------------------------------------

def test_three_concurrent_nightlies_each_get_a_true_verdict_and_are_all_stored(tmp_path, monkeypatch):
    """[issue 12] Two runs on one root (they take turns: the root's lock) and one on another
    root, all three storing into one results DB at the same time (ReFrame's DB lock)."""
    shared_db = tmp_path / "shared" / "results.db"
    env = {**os.environ, "IOSTACK_VENV": str(targets.settings().venv), "RFM_SQLITE_DB_FILE": str(shared_db)}
    runs = {"pass-a": (tmp_path / "a", QUICK), "fail-a": (tmp_path / "a", FAILING),
            "pass-b": (tmp_path / "b", QUICK)}
    procs = {name: subprocess.Popen([str(IOSTACK), "nightly", "--root", str(root), "--", *sel],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
             for name, (root, sel) in runs.items()}
    outs = {name: proc.communicate(timeout=1200)[0] for name, proc in procs.items()}
    for name, out in outs.items():
        print(name, out[-3000:])
    rcs = {name: proc.returncode for name, proc in procs.items()}
    assert rcs == {"pass-a": 0, "fail-a": 1, "pass-b": 0}
    reports = {name: pathlib.Path(re.search(r"^iostack: ReFrame report: (\S+)$", out, re.M).group(1))
               for name, out in outs.items()}
    sessions = {name: results.read_report(path) for name, path in reports.items()}
    for name, session in sessions.items():
        (tc,) = [t for t in results.last_attempts(session).values()
                 if results.check_of(t) == "FdbBitIdentityCheck"]
        assert tc["result"] == ("fail" if name == "fail-a" else "pass"), name
        assert reports[name].parent == runs[name][0] / "reframe" / "reports"
    assert len(set(reports.values())) == 3
    assert sum("iostack: waiting for the run holding" in outs[n] for n in ("pass-a", "fail-a")) == 1
    uuids = {s["session_info"]["uuid"] for s in sessions.values()}
    shared = targets.of(tmp_path / "a", RFM_SQLITE_DB_FILE=shared_db)
    stored = {s["session_info"]["uuid"] for s in results.stored_sessions(shared)}
    assert stored == uuids


def test_concurrent_writers_lose_no_session(tmp_path):
    """Eight processes store a session each into one results DB at once, through ReFrame's
    storage backend (its lock on .db.lock beside the DB, sqlite's busy timeout)."""
    root = tmp_path / "root"
    (root / "reframe").mkdir(parents=True)
    reports = []
    for i in range(8):
        uuid = f"00000000-0000-0000-0000-{i:012d}"
        tc = {"name": "FdbBitIdentityCheck", "system": "local", "partition": "default",
              "environ": "builtin", "job_completion_time_unix": 1.7e9 + i, "uuid": f"{uuid}:0:0"}
        report = {"session_info": {"uuid": uuid, "time_start_unix": 1.7e9 + i,
                                   "time_end_unix": 1.7e9 + i + 1, "num_cases": 1},
                  "runs": [{"testcases": [tc]}]}
        reports.append(root / "reframe" / f"report-{i}.json")
        reports[-1].write_text(json.dumps(report))
    account.give_tree(root)     # store-report runs as the service account
    env = {**os.environ, "IOSTACK_VENV": str(targets.settings().venv)}
    procs = [subprocess.Popen([str(IOSTACK), "store-report", "--root", str(root), str(r)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
             for r in reports]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, outs
    stored = [s["session_info"]["uuid"] for s in results.stored_sessions(targets.of(root, system="local"))]
    assert stored == [f"00000000-0000-0000-0000-{i:012d}" for i in range(8)]


# --- bounded in time ------------------------------------------------------------------

@pytest.fixture
def tiny_fs(is_root, tmp_path, loop_devices):
    """A 48 MiB ext4 on a loop device, left with 10 MiB free."""
    if not is_root:
        pytest.skip("needs root to mount a loop device")
    image, mnt = tmp_path / "tiny.img", tmp_path / "tiny"
    with open(image, "wb") as f:
        f.truncate(48 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-m", "0", "-F", str(image)], check=True)
    mnt.mkdir()
    subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], check=True)
    try:
        st = os.statvfs(mnt)
        fd = os.open(mnt / "filler", os.O_CREAT | os.O_WRONLY)
        os.posix_fallocate(fd, 0, st.f_bavail * st.f_frsize - (10 << 20))
        os.close(fd)
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_a_disk_that_fills_up_ends_the_run_in_bounded_time_naming_it(tiny_fs):
    """[issue 12] fdb-read blocked for ever on a full disk: eckit's FileHandle::write sleeps
    60 s and retries after ENOSPC, without end (seen with strace: write() = -ENOSPC, then
    clock_nanosleep(60 s)). Here gribgen and fdb-write fill most of the 10 MiB left and
    fdb-read hits ENOSPC: the tool is stopped, the check fails naming the file system."""
    root = tiny_fs / "root"
    # bounded: the run returns (subprocess's timeout is the hang guard, not an assertion
    # about speed), and the tool was stopped at its tool_timeout, as its line says
    p = iostack("nightly", "--root", root, "--", *QUICK, "-S", "FdbBitIdentityCheck.nsteps=52",
                "-S", "FdbBitIdentityCheck.tool_timeout=30", timeout=1800)
    assert p.returncode == 1
    fs = re.escape(f"file system {tiny_fs} (/dev/loop") + r"\d+" + re.escape(", ext4)")
    assert re.search(r"Reason: sanity error: " + fs, p.stdout), "the check does not name it"
    assert re.search(r"iostack-stopped: fdb-read after 30 s", p.stdout)
    assert any(re.match(r"iostack: error: " + fs + f" holding {root}/reframe is full", line)
               for line in errors(p))


def fake_reframe(tmp_path, script):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    exe = venv / "bin" / "reframe"
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(0o755)
    return venv


class StartedPopen(subprocess.Popen):
    """A Popen whose first wait() returns only once the child says it is ready (its file
    `ready` exists): the deadline then meets a process whose signal handling is in place,
    however slowly the machine started it."""
    ready: pathlib.Path

    def wait(self, timeout=None):
        if not getattr(self, "_seen_ready", False):
            while not self.ready.exists():
                assert self.poll() is None, "the fake reframe exited before it was ready"
                time.sleep(0.01)
            self._seen_ready = True
        return super().wait(timeout)


@pytest.fixture(params=["default", "ignored"])
def our_sigint(request):
    """This process's SIGINT as a shell leaves it: default, or ignored (a script's
    background job, `nightly &`), which a child inherits unless it is reset."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN if request.param == "ignored"
                           else signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize(("obeys_sigint", "rc"), [(True, 1), (False, -9)])
def test_the_deadline_interrupts_reframe_then_kills_it(tmp_path, monkeypatch, obeys_sigint, rc,
                                                       our_sigint):
    """The wall-clock bound: SIGINT (ReFrame then cancels its jobs), SIGKILL if it lingers.
    Exact on any machine: the deadline has passed when the child is ready, so SIGINT comes
    at once; one that obeys exits by itself (rc 1) in milliseconds, well within its grace of
    5 minutes; one that ignores it is killed when its grace (2 s) is over."""
    trap = "trap 'echo run session stopped: interrupted; exit 1' INT\n" if obeys_sigint else \
        "trap '' INT\n"
    ready = tmp_path / "ready"
    venv = fake_reframe(tmp_path, trap + f": > {ready}\nwhile :; do sleep 0.1; done\n")
    monkeypatch.setattr(reframe, "STOP_GRACE", 300 if obeys_sigint else 2)
    monkeypatch.setattr(StartedPopen, "ready", ready, raising=False)
    monkeypatch.setattr(process.subprocess, "Popen", StartedPopen)
    outcome = reframe.reframe(targets.of(tmp_path, IOSTACK_VENV=venv), deadline=time.monotonic())
    assert outcome.timed_out and outcome.rc == rc


# --- one line, never a traceback ------------------------------------------------------

@pytest.fixture
def read_only(is_root, tmp_path):
    if not is_root:
        pytest.skip("needs root to mount a read-only file system")
    mnt = tmp_path / "ro"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "iostack-ro", str(mnt)], check=True)
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def test_a_read_only_root_is_one_line_for_nightly_and_deploy(read_only):
    """[issue 12] both were an OSError 30 traceback."""
    root = read_only / "root"
    p = iostack("nightly", "--root", root, "--", *QUICK)
    assert p.returncode == 2 and "Traceback" not in p.stdout + p.stderr
    assert errors(p) == [f"iostack: error: deployment root {root} is not writable: Read-only "
                         f"file system: {root}"]
    try:
        from iostack.spack import runner
        runner.locate(targets.settings())
    except Exception:
        pytest.skip("deploy needs Spack (bin/iostack setup)")
    p = iostack("deploy", "--root", root)
    assert p.returncode == 2 and "Traceback" not in p.stdout + p.stderr
    assert errors(p) == [f"iostack: error: deployment root {root} is not writable: Read-only "
                         f"file system: {root}"]


@pytest.mark.parametrize("command", ["report", "record-baseline"])
def test_reading_commands_never_create_a_root(tmp_path, command):
    """[issue 12] a mistyped --root got a new <root>/reframe/results.db."""
    root = tmp_path / "mistyped"
    p = iostack(command, "--root", root)
    assert p.returncode == 1 and not root.exists()
    assert errors(p) == [
        f"iostack: error: no results DB at {root}/reframe/results.db (deployment root {root} "
        "does not exist): check --root / IOSTACK_ROOT, or run `bin/iostack nightly --site "
        "local` first"]


def test_a_bounded_tool_is_killed_and_says_where_it_was(tmp_path):
    """The job side of bounded(): the tool is killed at tool_timeout, the job goes on with
    the kill's exit code, and the line the sanity step reads names the file system."""
    from types import SimpleNamespace

    from iostack_rfm.base import IostackMixin, full_disk_problem

    # `sleep 3600` ends with rc 0 unless killed: rc 137 (SIGKILL) is the kill, on any machine
    line = IostackMixin.bounded(SimpleNamespace(tool_timeout=1), "sleep 3600")
    p = subprocess.run(["bash", "-c", line + '; echo "sleep rc=$?"'], cwd=tmp_path,
                       capture_output=True, text=True, timeout=600)
    stopped, rc = p.stdout.splitlines()
    assert rc == "sleep rc=137"
    assert stopped.startswith("iostack-stopped: sleep after 1 s; df: ")
    assert stopped.endswith(" " + filesystems.mount_of(tmp_path).mountpoint)
    assert full_disk_problem(p.stdout, "local:default") == "sleep was stopped after 1 s (tool_timeout)"
