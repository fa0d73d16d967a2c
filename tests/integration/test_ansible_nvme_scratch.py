"""nvme_scratch role on real loop devices of this node.

Every case builds sparse files in tmp_path, attaches them with
`losetup -f --show` and detaches (and unmounts) them in the finalizer.
The fstab and the role's record are scratch files, so /etc/fstab and
/var/lib/iostack are never touched. The RAID0 path needs the md driver,
which this kernel lacks: its plan is shown in check mode
(test_raid0_plan_in_check_mode), and it is applied with a stand-in mdadm
(ansible_fixtures/fake_mdadm.py) whose "array" is a loop device.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import pathlib
import re
import shutil
import socket
import stat
import subprocess
import sys
import threading

import pytest

from ansible_helpers import FIXTURES, Run, ansible_env, run_role

from iostack_testbed.cluster import ClusterError, drop_partitions, partition_holders

pytestmark = pytest.mark.usefixtures("loop_devices")

XFS_MIN = 320 * 1024 * 1024   # mkfs.xfs refuses filesystems below 300 MB
LABEL = "iostack-scr"


def _sh(*args, check=True) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, check=check)


@pytest.fixture
def loops(is_root, tmp_path):
    """Factory for loop devices; everything is unmounted and detached afterwards."""
    if not is_root:
        pytest.skip("needs root for losetup/mkfs/mount")
    if not os.path.exists("/dev/loop-control") or not shutil.which("losetup"):
        pytest.skip("no loop device support on this node")
    for tool in ("mkfs.xfs", "wipefs", "blkid", "findmnt"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} not installed")
    made: list[str] = []
    mounts: list[pathlib.Path] = []

    def make(size=XFS_MIN, backing=None) -> str:
        """A loop device on a new sparse file, or a second one on `backing`."""
        if backing is None:
            backing = tmp_path / f"disk{len(made)}.img"
            with open(backing, "wb") as fh:
                fh.truncate(size)
        dev = _sh("losetup", "-f", "--show", str(backing)).stdout.strip()
        made.append(dev)
        drop_partitions(dev)
        return dev

    make.mounts = mounts
    yield make
    for mnt in reversed(mounts + [tmp_path / "mnt"]):
        if os.path.ismount(mnt):
            _sh("umount", str(mnt), check=False)
    for dev in made:
        # partitions partx added (oracle_localscratch) outlive the detach as stale
        # /dev/loopNp1 nodes that the next user of the device would find: drop them first
        drop_partitions(dev)
        _sh("losetup", "-d", dev, check=False)
        assert not glob.glob(f"{dev}p*"), f"{dev}: partitions left behind"


def scratch_vars(tmp_path, devices, **extra):
    return {"nvme_scratch_devices": devices, "nvme_scratch_allow_plain_paths": True,
            "nvme_scratch_mount": str(tmp_path / "mnt"), "nvme_scratch_fstab": str(tmp_path / "fstab"),
            "nvme_scratch_mdadm_conf": str(tmp_path / "mdadm.conf"),
            "nvme_scratch_state_file": str(tmp_path / "state" / "nvme_scratch.json"), **extra}


def blkid(dev: str) -> dict:
    out = _sh("blkid", "-p", "-o", "export", dev, check=False).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def device_with_data(loops, tmp_path, size=64 * 1024 * 1024) -> tuple[str, str]:
    """A loop device holding ext4 with a data file; returns (device, sha256 of the file)."""
    dev = loops(size)
    _sh("mkfs.ext4", "-q", "-L", "precious", dev)
    mnt = tmp_path / "data"
    mnt.mkdir()
    _sh("mount", dev, str(mnt))
    payload = os.urandom(2 * 1024 * 1024)
    (mnt / "results.bin").write_bytes(payload)
    _sh("umount", str(mnt))
    return dev, hashlib.sha256(payload).hexdigest()


def file_sha_readonly(dev: str, mnt: pathlib.Path) -> str:
    mnt.mkdir(exist_ok=True)
    _sh("mount", "-o", "ro", dev, str(mnt))
    try:
        return sha256_of(str(mnt / "results.bin"))
    finally:
        _sh("umount", str(mnt))


def test_fresh_device_gets_xfs_uuid_mount_and_is_idempotent(loops, venv_bin, tmp_path):
    dev = loops()
    role_vars = scratch_vars(tmp_path, [dev])
    first = run_role(venv_bin, "nvme_scratch", role_vars, tmp_path)
    assert first.rc == 0, first.explain()
    assert first.changed > 0

    info = blkid(dev)
    assert info["TYPE"] == "xfs" and info["LABEL"] == LABEL
    mnt = tmp_path / "mnt"
    assert os.path.ismount(mnt)
    assert _sh("findmnt", "-n", "-o", "SOURCE", str(mnt)).stdout.strip() == dev
    entries = [line.split() for line in (tmp_path / "fstab").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    assert entries == [[f"UUID={info['UUID']}", str(mnt), "xfs",
                        "defaults,noatime,nofail,x-systemd.device-timeout=30s", "0", "0"]]
    for name in ("stage", "tmp"):
        st = os.stat(mnt / name)
        assert stat.S_IMODE(st.st_mode) == 0o1777
    verify = _sh("findmnt", "--verify", "--tab-file", str(tmp_path / "fstab"), check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr

    second = run_role(venv_bin, "nvme_scratch", role_vars, tmp_path)
    assert second.rc == 0, second.explain()
    assert second.changed == 0, second.changed_tasks()
    assert f"({dev}): ours" in second.messages()
    assert blkid(dev)["UUID"] == info["UUID"]


def test_device_with_data_is_refused_and_unchanged(loops, venv_bin, tmp_path):
    dev, file_sha = device_with_data(loops, tmp_path)
    dev_sha = sha256_of(dev)
    run = run_role(venv_bin, "nvme_scratch", scratch_vars(tmp_path, [dev]), tmp_path)
    assert run.rc != 0
    msgs = run.messages()
    assert f"{dev} ({dev}): refused - holds data: signatures" in msgs
    assert "ext4" in msgs and "nothing was changed" in msgs
    assert sha256_of(dev) == dev_sha
    assert file_sha_readonly(dev, tmp_path / "ro") == file_sha
    assert not (tmp_path / "fstab").exists()


def test_mounted_device_is_refused_even_with_force(loops, venv_bin, tmp_path):
    dev, file_sha = device_with_data(loops, tmp_path)
    busy = tmp_path / "busy"
    busy.mkdir()
    _sh("mount", dev, str(busy))
    loops.mounts.append(busy)
    run = run_role(venv_bin, "nvme_scratch",
                   scratch_vars(tmp_path, [dev], nvme_scratch_force_wipe=True), tmp_path)
    assert run.rc != 0
    assert f"mounted or in use: {busy}" in run.messages()
    assert "DESTROYING" not in run.messages()
    assert os.path.ismount(busy)
    assert sha256_of(str(busy / "results.bin")) == file_sha


def test_a_device_in_use_as_swap_is_refused_even_with_force(loops, venv_bin, tmp_path):
    """Swap is no mount: lsblk's mount points name it ([SWAP])."""
    if not shutil.which("swapon"):
        pytest.skip("swapon not installed")
    dev = loops(64 * 1024 * 1024)
    _sh("mkswap", dev)
    _sh("swapon", dev)
    try:
        run = run_role(venv_bin, "nvme_scratch",
                       scratch_vars(tmp_path, [dev], nvme_scratch_force_wipe=True), tmp_path)
        assert run.rc != 0
        assert f"{dev} ({dev}): refused - mounted or in use: [SWAP]" in run.messages()
        assert "DESTROYING" not in run.messages()
        assert dev in _sh("swapon", "--show=NAME", "--noheadings").stdout.split()
        assert blkid(dev)["TYPE"] == "swap"
    finally:
        _sh("swapoff", dev, check=False)


def test_root_disk_is_never_a_candidate(is_root, venv_bin, tmp_path):
    """The disk under / is refused even when listed with force (check mode, as a second guard)."""
    if not is_root:
        pytest.skip("needs root to probe block devices")
    source = _sh("findmnt", "-n", "-e", "-o", "SOURCE", "--target", "/").stdout.strip()
    if not source.startswith("/dev/"):
        pytest.skip(f"/ is not on a block device here ({source})")
    disks = [line.split()[0] for line in _sh("lsblk", "-n", "-p", "-s", "-o", "NAME,TYPE", source).stdout.splitlines()
             if line.split()[-1] == "disk"]
    root_disk = disks[-1].lstrip("`|-") if disks else source
    root_disk = "/dev/" + root_disk.split("/dev/", 1)[1]
    run = run_role(venv_bin, "nvme_scratch",
                   scratch_vars(tmp_path, [root_disk], nvme_scratch_force_wipe=True), tmp_path, check=True)
    assert run.rc != 0
    assert f"{root_disk} ({root_disk}): refused - root/boot disk" in run.messages()
    assert "DESTROYING" not in run.messages()
    ran = [name.split(" : ", 1)[-1] for name, _ in run.results()]
    assert "Refuse unsafe devices and bad arguments" in ran
    assert not any(name.startswith(("Wipe", "Create the XFS", "Mount by UUID")) for name in ran)


def test_force_wipe_lists_what_it_destroys_then_formats(loops, venv_bin, tmp_path):
    dev = loops()
    _sh("mkfs.ext4", "-q", "-L", "oldjob", dev)
    old_uuid = blkid(dev)["UUID"]
    run = run_role(venv_bin, "nvme_scratch",
                   scratch_vars(tmp_path, [dev], nvme_scratch_force_wipe=True), tmp_path)
    assert run.rc == 0, run.explain()
    msgs = run.messages()
    destroy_line = next(m for m in msgs.splitlines() if "DESTROYING" in m)
    assert destroy_line  # the announcement comes before the wipe task
    assert f"UUID={old_uuid}" in msgs and "LABEL=oldjob" in msgs
    info = blkid(dev)
    assert info["TYPE"] == "xfs" and info["LABEL"] == LABEL and info["UUID"] != old_uuid
    assert os.path.ismount(tmp_path / "mnt")


def test_plain_kernel_path_needs_opt_in(loops, venv_bin, tmp_path):
    dev = loops()
    run = run_role(venv_bin, "nvme_scratch",
                   scratch_vars(tmp_path, [dev], nvme_scratch_allow_plain_paths=False), tmp_path)
    assert run.rc != 0
    assert "not a stable identity" in run.messages()
    assert _sh("wipefs", "-n", dev).stdout.strip() == ""


def test_raid0_plan_in_check_mode(loops, venv_bin, tmp_path):
    """Two devices make a RAID0 md array. No md driver here, so check mode only:
    the plan names the mdadm command and nothing is written to the devices."""
    a, b = loops(64 * 1024 * 1024), loops(64 * 1024 * 1024)
    run = run_role(venv_bin, "nvme_scratch", scratch_vars(tmp_path, [a, b]), tmp_path, check=True,
                   gather=True)
    assert run.rc == 0, run.explain()
    msgs = run.messages()
    assert f"RAID0 /dev/md/scratch over {a}, {b}" in msgs
    assert (f"would run mdadm --create /dev/md/scratch --name=scratch --level=0 --raid-devices=2 "
            f"--run {a} {b}") in msgs
    if not shutil.which("mdadm"):
        assert "would install mdadm" in msgs
    for dev in (a, b):
        assert _sh("wipefs", "-n", dev).stdout.strip() == ""
    assert not (tmp_path / "fstab").exists()
    assert not (tmp_path / "mdadm.conf").exists()


def test_empty_device_list_skips(venv_bin, tmp_path):
    run = run_role(venv_bin, "nvme_scratch", {"nvme_scratch_devices": []}, tmp_path)
    assert run.rc == 0 and run.changed == 0
    assert "nvme_scratch_devices is empty" in run.messages()


def blank(dev: str) -> bool:
    return _sh("wipefs", "-n", dev).stdout.strip() == ""


@pytest.mark.parametrize(("fs_vars", "problem", "size"), [
    ({"nvme_scratch_label": "iostack-scratch"},
     "label 'iostack-scratch' has 15 bytes: a xfs label holds 1 to 12", XFS_MIN),
    ({"nvme_scratch_fstype": "ext4", "nvme_scratch_label": "iostack-scratch-1"},
     "label 'iostack-scratch-1' has 17 bytes: a ext4 label holds 1 to 16", XFS_MIN),
    ({"nvme_scratch_mkfs_opts": "-d agcount=0"},
     "mkfs.xfs refuses the options '-L iostack-scr -d agcount=0' for {dev}: Invalid value 0 for -d agcount",
     XFS_MIN),
    ({"nvme_scratch_mount_opts": "defaults,noatime,nosuchoption"},
     "mount refuses the options 'defaults,noatime,nosuchoption' for xfs", XFS_MIN),
    # the device itself is read (mkfs.xfs -N): one too small for XFS is refused before the
    # wipe, where a throwaway image of the right size alone let the wipe go ahead
    ({}, "mkfs.xfs refuses the options '-L iostack-scr' for {dev}: Filesystem must be larger than 300MB.",
     64 * 1024 * 1024),
])
def test_bad_mkfs_or_mount_arguments_stop_a_forced_wipe(loops, venv_bin, tmp_path, fs_vars, problem,
                                                        size):
    """[issue 12] An over-long label passed the forced wipe, then mkfs refused it: every
    argument is now checked first, and the device keeps its data."""
    dev, file_sha = device_with_data(loops, tmp_path, size)
    dev_sha = sha256_of(dev)
    run = run_role(venv_bin, "nvme_scratch",
                   scratch_vars(tmp_path, [dev], nvme_scratch_force_wipe=True, **fs_vars), tmp_path)
    assert run.rc != 0
    msgs = run.messages()
    assert f"invalid argument: {problem.format(dev=dev)}" in msgs, msgs
    assert "nothing was changed" in msgs and "DESTROYING" not in msgs
    ran = [name.split(" : ", 1)[-1] for name, _ in run.results()]
    assert not any(name.startswith(("Show the plan", "Wipe", "Create the filesystem")) for name in ran)
    assert sha256_of(dev) == dev_sha
    assert file_sha_readonly(dev, tmp_path / "ro") == file_sha


def test_a_name_that_moved_to_another_disk_is_refused_not_formatted(loops, venv_bin, tmp_path):
    """[issue 12] A plain kernel name that, after a reorder, names another (blank) disk: the
    role refuses it, says where its filesystem went, and formats nothing. The kernel name
    is a symlink here, repointed as a reorder repoints /dev/nvme1n1."""
    first, second = loops(), loops()
    name = tmp_path / "nvme1n1"
    name.symlink_to(first)
    role_vars = scratch_vars(tmp_path, [str(name)])
    run = run_role(venv_bin, "nvme_scratch", role_vars, tmp_path)
    assert run.rc == 0, run.explain()
    uuid = blkid(first)["UUID"]
    state = json.loads((tmp_path / "state" / "nvme_scratch.json").read_text())
    assert state["filesystems"] == {str(tmp_path / "mnt"): uuid}
    assert state["devices"][str(name)]["identity"].startswith("loop backing file ")
    _sh("umount", str(tmp_path / "mnt"))
    fstab = (tmp_path / "fstab").read_text()

    name.unlink()
    name.symlink_to(second)
    run = run_role(venv_bin, "nvme_scratch", role_vars, tmp_path)
    assert run.rc != 0
    msgs = run.messages()
    assert f"{name} ({second}): refused - names another device than the one this role formatted" in msgs
    assert f"now {first}" in msgs and "device names moved" in msgs
    assert blank(second)
    assert blkid(first)["UUID"] == uuid
    assert (tmp_path / "fstab").read_text() == fstab


def test_a_second_loop_on_a_mounted_file_is_refused_even_with_force(loops, venv_bin, tmp_path):
    """[issue 12] wipefs ran on a second loop device on the backing file of a mounted one."""
    dev, file_sha = device_with_data(loops, tmp_path)
    busy = tmp_path / "busy"
    busy.mkdir()
    _sh("mount", dev, str(busy))
    loops.mounts.append(busy)
    backing = _sh("losetup", "-n", "-O", "BACK-FILE", dev).stdout.strip()
    alias = loops(backing=backing)
    run = run_role(venv_bin, "nvme_scratch",
                   scratch_vars(tmp_path, [alias], nvme_scratch_force_wipe=True), tmp_path)
    assert run.rc != 0
    msgs = run.messages()
    assert f"{alias} ({alias}): refused - mounted or in use: {busy} (through {dev}, on the same backing file)" in msgs
    assert "DESTROYING" not in msgs
    assert os.path.ismount(busy) and sha256_of(str(busy / "results.bin")) == file_sha


@pytest.fixture
def fake_mdadm(tmp_path, monkeypatch):
    """PATH finds ansible_fixtures/fake_mdadm.py as `mdadm`; returns the log's reader."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "mdadm").symlink_to(FIXTURES / "fake_mdadm.py")
    log = tmp_path / "mdadm.log"
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MDADM_LOG", str(log))
    monkeypatch.setenv("FAKE_MDADM_STATE", str(tmp_path / "mdadm-state.json"))

    def calls():
        lines = log.read_text().splitlines() if log.exists() else []
        log.write_text("")
        return lines
    return calls


def test_raid0_is_created_then_assembled_then_left_alone(loops, fake_mdadm, venv_bin, tmp_path,
                                                        monkeypatch):
    """[issue 12] The apply path of RAID0, with a stand-in mdadm: the exact create command,
    assemble (not create) when the members carry the array but /dev/md/<name> is gone, and
    nothing at all once /dev/md/<name> is there."""
    a, b = loops(64 * 1024 * 1024), loops(64 * 1024 * 1024)
    monkeypatch.setenv("FAKE_MDADM_STANDIN", loops())
    name = f"iostack-test-{os.getpid()}"
    md = pathlib.Path("/dev/md") / name
    role_vars = scratch_vars(tmp_path, [a, b], nvme_scratch_md_name=name,
                             nvme_scratch_update_initramfs=False)
    try:
        run = run_role(venv_bin, "nvme_scratch", role_vars, tmp_path)
        assert run.rc == 0, run.explain()
        assert fake_mdadm() == [
            f"--examine --brief {a} {b}",
            f"--create /dev/md/{name} --name={name} --level=0 --raid-devices=2 --run {a} {b}",
            f"--detail --brief /dev/md/{name}"]
        assert blkid(str(md))["LABEL"] == LABEL and os.path.ismount(tmp_path / "mnt")
        conf = (tmp_path / "mdadm.conf").read_text()
        assert conf.startswith(f"ARRAY /dev/md/{name} metadata=1.2 UUID=") and f"name={socket.gethostname()}:{name}" in conf

        md.unlink()     # a reboot without the array assembled
        run = run_role(venv_bin, "nvme_scratch", role_vars, tmp_path)
        assert run.rc == 0, run.explain()
        assert fake_mdadm() == [f"--examine --brief {a} {b}", f"--assemble /dev/md/{name} {a} {b}",
                                f"--detail --brief /dev/md/{name}"]

        run = run_role(venv_bin, "nvme_scratch", role_vars, tmp_path)
        assert run.rc == 0 and run.changed == 0, run.changed_tasks()
        assert fake_mdadm() == [f"--detail --brief /dev/md/{name}"]
    finally:
        if md.is_symlink():
            md.unlink()
        if md.parent.is_dir() and not any(md.parent.iterdir()):
            md.parent.rmdir()


# ---- each OS's own mdadm.conf and initramfs tool -------------------------------------------

# ansible_facts as a node of each OS would report them (given with -e, nothing gathered)
OS_FACTS = {
    "debian12": {"os_family": "Debian", "distribution": "Debian", "distribution_major_version": "12"},
    "ol8": {"os_family": "RedHat", "distribution": "OracleLinux", "distribution_major_version": "8"},
    "sles15": {"os_family": "Suse", "distribution": "SLES", "distribution_major_version": "15"},
}


@pytest.mark.parametrize(("os_name", "conf", "initramfs"), [
    ("debian12", "/etc/mdadm/mdadm.conf", "update-initramfs -u"),
    ("ol8", "/etc/mdadm.conf", "dracut --force"),
    ("sles15", "/etc/mdadm.conf", "dracut --force"),
])
def test_raid0_is_recorded_where_each_os_reads_it(loops, venv_bin, tmp_path, os_name, conf,
                                                  initramfs):
    """Oracle Linux 8 and SLES 15 read /etc/mdadm.conf and build their initramfs with
    dracut; Debian's mdadm.conf and update-initramfs are never used there. Planned in check
    mode (no md driver here), with the OS's facts given."""
    a, b = loops(64 * 1024 * 1024), loops(64 * 1024 * 1024)
    role_vars = scratch_vars(tmp_path, [a, b], nvme_scratch_mdadm_conf="",
                             ansible_facts=OS_FACTS[os_name])
    run = run_role(venv_bin, "nvme_scratch", role_vars, tmp_path, check=True)
    assert run.rc == 0, run.explain()
    msgs = run.messages()
    assert f"nvme_scratch: the array goes in {conf}, then {initramfs} rebuilds the initramfs" in msgs
    other = {"/etc/mdadm/mdadm.conf", "/etc/mdadm.conf"} - {conf}
    assert not any(o in msgs for o in other)
    if os_name != "debian12":
        assert "update-initramfs" not in msgs


def test_an_os_the_role_does_not_know_is_refused_in_one_line(loops, venv_bin, tmp_path):
    a, b = loops(64 * 1024 * 1024), loops(64 * 1024 * 1024)
    role_vars = scratch_vars(tmp_path, [a, b], nvme_scratch_mdadm_conf="", ansible_facts={
        "os_family": "Archlinux", "distribution": "Archlinux"})
    run = run_role(venv_bin, "nvme_scratch", role_vars, tmp_path, check=True)
    assert run.rc != 0
    assert ("nvme_scratch: no mdadm.conf location or initramfs tool known for Archlinux "
            "(Archlinux); set nvme_scratch_mdadm_conf and nvme_scratch_initramfs_command. "
            "Nothing was changed.") in run.messages()


# ---- check mode writes nothing --------------------------------------------------------------

def host_state(devices: list[str], tmp_path: pathlib.Path, tmpdir: pathlib.Path) -> dict:
    """What a run could change on this host, seen by the system's own tools: the mount
    table and loop devices (those of this test: its devices, its paths, its temporary
    directory; other work on the machine mounts too), the devices' bytes, and the files
    under tmp_path and the run's TMPDIR."""
    ours = [*devices, str(tmp_path), str(tmpdir)]
    majmin = {_sh("lsblk", "-dno", "MAJ:MIN", d).stdout.strip() for d in devices}
    mounts = [line for line in pathlib.Path("/proc/self/mountinfo").read_text().splitlines()
              if any(o in line for o in ours) or line.split()[2] in majmin]
    loops = [line for line in _sh("losetup", "-a").stdout.splitlines()
             if any(o in line for o in ours) or "nvme-scratch-trial" in line]
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    return {"mounts": mounts, "loops": loops, "bytes": {d: sha256_of(d) for d in devices},
            "files": files, "tmpdir": sorted(p.name for p in tmpdir.iterdir())}


# ioctls that attach, detach or change a loop device (reading one's status changes nothing)
LOOP_WRITES = re.compile(r"LOOP_(SET_FD|CONFIGURE|SET_STATUS|CLR_FD|CTL_ADD|CTL_GET_FREE)")


def traced_run(venv_bin, role_vars, tmp_path, tmpdir, check: bool):
    """ansible-playbook under strace: (run, the syscalls that mount, attach a loop device
    or make the role's throwaway image, from every process of the run)."""
    trace = tmp_path / "strace.log"
    env = {"TMPDIR": str(tmpdir)}
    vars_file = tmp_path / "vars.json"
    vars_file.write_text(json.dumps({"ansible_python_interpreter": sys.executable,
                                     "test_role": "nvme_scratch", **role_vars}))
    argv = ["strace", "-f", "-qq", "-o", str(trace), "-e",
            "trace=mount,umount2,ioctl,openat,mkdir,mkdirat",
            str(venv_bin / "ansible-playbook"), "-i", "localhost,", "-c", "local", "-e",
            f"@{vars_file}", str(FIXTURES / "role.yml")] + (["--check"] if check else [])
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                       env={**ansible_env(venv_bin), **env})
    data = json.loads(p.stdout) if p.stdout.startswith("{") else {}
    # (Ansible unpacks its module payloads in TMPDIR too: the role's own files there are
    # the trial's, named nvme-scratch-trial-*)
    writes = [line for line in trace.read_text().splitlines()
              if re.search(r" (mount|umount2)\(", line) or LOOP_WRITES.search(line)
              or ("nvme-scratch-trial" in line and re.search(r"O_CREAT|mkdir", line))]
    return Run(p.returncode, data, p.stdout, p.stderr), writes


@pytest.mark.parametrize("case", ["fresh", "forced wipe", "bad mkfs option"])
def test_check_mode_leaves_the_host_as_it_was(loops, venv_bin, tmp_path, case):
    """`--check` plans without writing: the device a run would format is read by mkfs's own
    no-write mode, no throwaway image is made or loop-mounted (strace of the whole run sees
    no mount, no loop device attached, no file made in its TMPDIR), and the mounts, loop
    devices, device bytes and files are as before. The same play without --check shows
    that the trace sees all of it."""
    if not shutil.which("strace"):
        pytest.skip("strace not installed")
    if case == "forced wipe":
        dev, _ = device_with_data(loops, tmp_path, XFS_MIN)
        extra = {"nvme_scratch_force_wipe": True}
    else:
        dev = loops()
        extra = {"nvme_scratch_mkfs_opts": "-d agcount=0"} if case == "bad mkfs option" else {}
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    role_vars = scratch_vars(tmp_path, [dev], **extra)
    before = host_state([dev], tmp_path, tmpdir)
    run, writes = traced_run(venv_bin, role_vars, tmp_path, tmpdir, check=True)
    after = host_state([dev], tmp_path, tmpdir)
    for name in ("strace.log", "vars.json"):
        after["files"].remove(name)
    assert writes == []
    assert after == before
    msgs = run.messages()
    if case == "bad mkfs option":
        assert run.rc != 0
        assert (f"invalid argument: mkfs.xfs refuses the options '-L iostack-scr -d agcount=0' "
                f"for {dev}: Invalid value 0 for -d agcount") in msgs
    else:
        assert run.rc == 0, run.explain()
        assert f"mkfs.xfs -N -f -L iostack-scr {dev}: accepted (writes nothing)" in msgs
        assert "mount options 'defaults,noatime,nofail,x-systemd.device-timeout=30s': not tried in check mode" in msgs

    if case == "fresh":
        # the control: a real run formats, tries its options on a throwaway image and mounts
        real, writes = traced_run(venv_bin, role_vars, tmp_path, tmpdir, check=False)
        assert real.rc == 0, real.explain()
        assert any(" mount(" in w for w in writes) and any(LOOP_WRITES.search(w) for w in writes)
        assert any(str(tmpdir) in w and "nvme-scratch-trial" in w for w in writes)
        assert host_state([dev], tmp_path, tmpdir)["mounts"] != before["mounts"]


# --- a file system Oracle's OCI HPC tips made ([OCI-Tips-NVMe]) -------------------------------

ORACLE = {"nvme_scratch_adopt": [{"label": "localscratch", "fstype": "xfs"}],
          "nvme_scratch_label": "localscratch", "nvme_scratch_mount_opts": "defaults,noatime"}


def oracle_localscratch(loops, tmp_path, label="localscratch", mount_at=None):
    """A disk as Oracle's tips leave a BM.Optimized3.36 node [OCI-Tips-NVMe]: `parted mklabel
    gpt`, one partition, `mkfs.xfs -L localscratch`, mounted at the scratch (or `mount_at`,
    or nowhere when False) by `LABEL=... <mount>/ xfs defaults,noatime` in the fstab, with a
    job's result on it. Returns (disk, partition, UUID, sha256 of the result)."""
    if not shutil.which("parted") or not shutil.which("partx"):
        pytest.skip("parted/partx not installed (apt: parted, util-linux)")
    dev = loops(XFS_MIN + (16 << 20))
    _sh("parted", "-s", dev, "mklabel", "gpt")
    _sh("parted", "-s", dev, "--", "mkpart", "primary", "xfs", "1", "-1")
    _sh("partx", "-a", dev, check=False)      # a loop device scans no partitions itself
    part = f"{dev}p1"
    _sh("mkfs.xfs", "-q", "-L", label, part)
    mnt = tmp_path / "mnt" if mount_at is None else mount_at
    (tmp_path / "fstab").write_text(f"LABEL={label} {tmp_path / 'mnt'}/ xfs defaults,noatime 0 0\n")
    payload = os.urandom(1 << 20)
    if mnt is not False:
        mnt.mkdir(exist_ok=True)
        _sh("mount", "-o", "noatime", part, str(mnt))
        loops.mounts.append(mnt)
        (mnt / "job-result.bin").write_bytes(payload)
    return dev, part, blkid(part)["UUID"], hashlib.sha256(payload).hexdigest()


def test_the_file_system_oracle_made_is_adopted_as_it_is(loops, venv_bin, tmp_path):
    """On a node Oracle's tips formatted, the role uses their localscratch file system: it
    formats and wipes nothing (even with force), keeps their fstab entry, makes the jobs'
    directories and records what it adopted; run again, nothing changes."""
    dev, part, uuid, result = oracle_localscratch(loops, tmp_path)
    fstab = (tmp_path / "fstab").read_text()
    role_vars = scratch_vars(tmp_path, [dev], nvme_scratch_force_wipe=True, **ORACLE)
    run = run_role(venv_bin, "nvme_scratch", role_vars, tmp_path)
    assert run.rc == 0, run.explain()
    assert f"({dev}): adopt" in run.messages() and "DESTROYING" not in run.messages()
    mnt = tmp_path / "mnt"
    assert blkid(part)["UUID"] == uuid and blkid(part)["LABEL"] == "localscratch"
    assert sha256_of(str(mnt / "job-result.bin")) == result
    assert (tmp_path / "fstab").read_text() == fstab
    for name in ("stage", "tmp"):
        assert stat.S_IMODE(os.stat(mnt / name).st_mode) == 0o1777
    record = json.loads((tmp_path / "state" / "nvme_scratch.json").read_text())
    assert record["filesystems"] == {str(mnt): uuid}
    assert record["devices"][dev]["adopted"] == part
    again = run_role(venv_bin, "nvme_scratch", role_vars, tmp_path)
    assert again.rc == 0 and again.changed == 0, again.changed_tasks()


@pytest.mark.parametrize("case", ["another label", "mounted elsewhere", "not mounted"])
def test_a_file_system_the_role_may_not_adopt_is_refused_and_unchanged(loops, venv_bin,
                                                                       tmp_path, case):
    """Adoption is no way round the rule: a foreign file system of another label, or one of
    Oracle's label that does not serve as the scratch (mounted elsewhere, or not mounted), is
    refused in one message and stays byte for byte, without force."""
    elsewhere = tmp_path / "elsewhere"
    dev, part, uuid, result = oracle_localscratch(
        loops, tmp_path, label="precious" if case == "another label" else "localscratch",
        mount_at={"mounted elsewhere": elsewhere, "not mounted": False}.get(case))
    if case == "not mounted":
        before = sha256_of(dev)
    run = run_role(venv_bin, "nvme_scratch", scratch_vars(tmp_path, [dev], **ORACLE), tmp_path)
    assert run.rc != 0 and "nothing was changed" in run.messages()
    msgs = run.messages()
    if case == "another label":
        assert "mounted or in use" in msgs
    else:
        assert "a file system nvme_scratch_adopt names, but it is" in msgs
        assert ("mounted at " + str(elsewhere)) in msgs if case == "mounted elsewhere" \
            else "not mounted" in msgs
    assert blkid(part)["UUID"] == uuid
    if case == "not mounted":
        assert sha256_of(dev) == before
    else:
        mnt = elsewhere if case == "mounted elsewhere" else tmp_path / "mnt"
        assert sha256_of(str(mnt / "job-result.bin")) == result
    assert not (tmp_path / "state" / "nvme_scratch.json").exists()


def test_the_prolog_makes_again_what_oracles_epilog_empties(loops, venv_bin, tmp_path):
    """Oracle's recommended Epilog, `rm -rf /mnt/localdisk/*` after every job
    [OCI-Tips-SlurmOps], takes the jobs' directories with it: the Prolog the role writes
    makes them again, with their modes, before the next job; without the scratch mounted it
    does nothing and exits 0 (a failing Prolog would drain the node)."""
    dev, part, uuid, _ = oracle_localscratch(loops, tmp_path)
    prolog = tmp_path / "prolog.d" / "20_iostack_scratch.sh"
    prolog.parent.mkdir()
    dirs = [{"path": "stage", "mode": "1777"}, {"path": "tmp", "mode": "1777"},
            {"path": "iostack-rfm", "mode": "1777"}]
    run = run_role(venv_bin, "nvme_scratch", scratch_vars(
        tmp_path, [dev], nvme_scratch_prolog=str(prolog), nvme_scratch_dirs=dirs, **ORACLE), tmp_path)
    assert run.rc == 0, run.explain()
    mnt = tmp_path / "mnt"
    _sh("bash", "-c", f"/bin/rm -rf {mnt}/*")          # the epilog
    assert sorted(os.listdir(mnt)) == []
    done = _sh("bash", str(prolog))
    assert done.returncode == 0
    assert sorted(os.listdir(mnt)) == ["iostack-rfm", "stage", "tmp"]
    assert {stat.S_IMODE(os.stat(mnt / d["path"]).st_mode) for d in dirs} == {0o1777}
    _sh("umount", str(mnt))
    assert _sh("bash", str(prolog)).returncode == 0 and os.listdir(mnt) == []


def test_a_partition_an_earlier_user_left_on_the_device_is_dropped(loops, tmp_path):
    """partx's partitions outlive `losetup -d`: the next image attached to the device shows
    them, and the role would refuse it as holding data. The test bed drops them (cluster.py)."""
    if not shutil.which("parted") or not shutil.which("partx"):
        pytest.skip("parted/partx not installed (apt: parted, util-linux)")
    dev = loops(64 * 1024 * 1024)
    _sh("parted", "-s", dev, "mklabel", "gpt")
    _sh("parted", "-s", dev, "--", "mkpart", "primary", "xfs", "1", "-1")
    _sh("partx", "-a", dev, check=False)     # parted may have added it already
    assert glob.glob(f"{dev}p*") == [f"{dev}p1"]
    _sh("losetup", "-d", dev)
    fresh = tmp_path / "fresh.img"
    with open(fresh, "wb") as fh:
        fh.truncate(64 * 1024 * 1024)
    _sh("losetup", dev, str(fresh))
    assert glob.glob(f"{dev}p*") == [f"{dev}p1"]       # stale: the new image is all zeros
    drop_partitions(dev)
    assert glob.glob(f"{dev}p*") == []


def test_a_partition_another_namespace_still_mounts_is_dropped_once_that_namespace_ends(
        loops, tmp_path):
    """What failed CI: a test elsewhere made a mount namespace (`unshare --mount`) while this
    module's partition was mounted; the host's umount left that copy, so `partx -d` got
    EBUSY and the partition outlived the device. Dropping it waits for the namespace (it
    ends with its test) and, if it does not end, names it."""
    if not shutil.which("parted") or not shutil.which("partx"):
        pytest.skip("parted/partx not installed (apt: parted, util-linux)")
    dev, part, _, _ = oracle_localscratch(loops, tmp_path)
    holder = subprocess.Popen(["unshare", "--mount", "sh", "-c", "echo copied; exec cat"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "copied\n"     # its namespace holds a copy now
        _sh("umount", str(tmp_path / "mnt"))
        assert _sh("partx", "-d", dev, check=False).returncode != 0       # EBUSY, as in CI
        assert glob.glob(f"{dev}p*") == [part]
        (held,) = partition_holders(dev)
        assert held.startswith("pid ") and held.endswith("(cat)")
        with pytest.raises(ClusterError, match=r"still in use after 0 s, mounted by pid \d+ \(cat\)"):
            drop_partitions(dev, wait=0)
        assert glob.glob(f"{dev}p*") == [part]
        threading.Timer(1.0, holder.stdin.close).start()    # the other test ends
        drop_partitions(dev, wait=120)
        assert glob.glob(f"{dev}p*") == []
    finally:
        holder.kill()
        holder.wait()
