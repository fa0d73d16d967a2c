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

import hashlib
import json
import os
import pathlib
import shutil
import socket
import stat
import subprocess

import pytest

from ansible_helpers import FIXTURES, run_role  # noqa: E402

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
        return dev

    make.mounts = mounts
    yield make
    for mnt in reversed(mounts + [tmp_path / "mnt"]):
        if os.path.ismount(mnt):
            _sh("umount", str(mnt), check=False)
    for dev in made:
        _sh("losetup", "-d", dev, check=False)


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


def device_with_data(loops, tmp_path) -> tuple[str, str]:
    """A loop device holding ext4 with a data file; returns (device, sha256 of the file)."""
    dev = loops(64 * 1024 * 1024)
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
    run = run_role(venv_bin, "nvme_scratch", scratch_vars(tmp_path, [a, b]), tmp_path, check=True)
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


@pytest.mark.parametrize(("fs_vars", "problem"), [
    ({"nvme_scratch_label": "iostack-scratch"},
     "label 'iostack-scratch' has 15 bytes: a xfs label holds 1 to 12"),
    ({"nvme_scratch_fstype": "ext4", "nvme_scratch_label": "iostack-scratch-1"},
     "label 'iostack-scratch-1' has 17 bytes: a ext4 label holds 1 to 16"),
    ({"nvme_scratch_mkfs_opts": "-d agcount=0"},
     "mkfs.xfs refuses the options '-L iostack-scr -d agcount=0': Invalid value 0 for -d agcount"),
    ({"nvme_scratch_mount_opts": "defaults,noatime,nosuchoption"},
     "mount refuses the options 'defaults,noatime,nosuchoption' for xfs"),
])
def test_bad_mkfs_or_mount_arguments_stop_a_forced_wipe(loops, venv_bin, tmp_path, fs_vars, problem):
    """[issue 12] An over-long label passed the forced wipe, then mkfs refused it: every
    argument is now checked first, and the device keeps its data."""
    dev, file_sha = device_with_data(loops, tmp_path)
    dev_sha = sha256_of(dev)
    run = run_role(venv_bin, "nvme_scratch",
                   scratch_vars(tmp_path, [dev], nvme_scratch_force_wipe=True, **fs_vars), tmp_path)
    assert run.rc != 0
    msgs = run.messages()
    assert f"invalid argument: {problem}" in msgs, msgs
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
