"""smt, hugepages and lustre_striping roles on this node.

smt and the THP part of hugepages run against fixture sysfs trees (the
roles take the sysfs root as a variable). The 2 MB pool is set for real on
this kernel (root only) with a scratch sysctl.d file, then restored.
Lustre is absent here: one case shows the skip note, one uses a stand-in
`lfs` (ansible_fixtures/fake_lfs.py) to show compare-before-set.
"""
from __future__ import annotations

import pathlib
import re

import pytest

from ansible_helpers import FIXTURES, make_sysfs, run_role  # noqa: E402


# --- smt -----------------------------------------------------------------------

def smt_vars(sysfs, tmp_path, enabled, **extra):
    return {"smt_enabled": enabled, "smt_sysfs_root": str(sysfs),
            "smt_grub_dropin": str(tmp_path / "grub.d/iostack-nosmt.cfg"),
            "smt_update_grub_command": "", "smt_verify": False, **extra}


def control(sysfs) -> str:
    return (sysfs / "devices/system/cpu/smt/control").read_text().strip()


def test_smt_off_persist_then_on_again(venv_bin, tmp_path):
    sysfs = make_sysfs(tmp_path / "sys", sockets=1, numa_nodes=1, smt_control="on", smt_active="1")
    dropin = tmp_path / "grub.d/iostack-nosmt.cfg"

    off = run_role(venv_bin, "smt", smt_vars(sysfs, tmp_path, False), tmp_path)
    assert off.rc == 0, off.explain()
    assert control(sysfs) == "off"
    assert re.search(r'^GRUB_CMDLINE_LINUX="\$\{GRUB_CMDLINE_LINUX\} nosmt"$', dropin.read_text(), re.M)
    assert "write off to smt/control" in off.messages()

    again = run_role(venv_bin, "smt", smt_vars(sysfs, tmp_path, False), tmp_path)
    assert again.rc == 0, again.explain()
    assert again.changed == 0, again.changed_tasks()

    on = run_role(venv_bin, "smt", smt_vars(sysfs, tmp_path, True), tmp_path)
    assert on.rc == 0, on.explain()
    assert control(sysfs) == "on"
    assert not dropin.exists()


def test_smt_off_in_bios_needs_no_runtime_change(venv_bin, tmp_path):
    sysfs = make_sysfs(tmp_path / "sys", sockets=1, numa_nodes=1, smt_control="notsupported", smt_active="0")
    run = run_role(venv_bin, "smt", smt_vars(sysfs, tmp_path, False, smt_verify=True), tmp_path)
    assert run.rc == 0, run.explain()
    assert run.changed == 0
    assert control(sysfs) == "notsupported"
    assert not (tmp_path / "grub.d").exists()
    assert "SMT is off (smt/active=0)" in run.messages()


@pytest.mark.parametrize(("ctl", "active", "enabled", "error"), [
    ("notsupported", "0", True, "SMT is off in the BIOS/firmware"),
    ("forceoff", "0", True, "nosmt=force"),
    ("off", "1", False, "the kernel did not apply it"),
])
def test_smt_refusals_and_verification(venv_bin, tmp_path, ctl, active, enabled, error):
    sysfs = make_sysfs(tmp_path / "sys", sockets=1, numa_nodes=1, smt_control=ctl, smt_active=active)
    run = run_role(venv_bin, "smt", smt_vars(sysfs, tmp_path, enabled, smt_verify=True), tmp_path)
    assert run.rc != 0
    assert error in run.messages()
    assert control(sysfs) == ctl


# --- hugepages -------------------------------------------------------------------

@pytest.fixture
def restore_hugepages(is_root):
    if not is_root:
        pytest.skip("needs root to set vm.nr_hugepages")
    knob = pathlib.Path("/proc/sys/vm/nr_hugepages")
    old = knob.read_text().strip()
    yield
    knob.write_text(old)


def meminfo_total() -> int:
    text = pathlib.Path("/proc/meminfo").read_text()
    return int(re.search(r"HugePages_Total:\s+(\d+)", text).group(1))


def test_hugepages_pool_is_set_verified_and_idempotent(restore_hugepages, venv_bin, tmp_path):
    want = meminfo_total() + 8
    role_vars = {"hugepages_2m_count": want, "hugepages_sysctl_file": str(tmp_path / "60-hugepages.conf")}
    first = run_role(venv_bin, "hugepages", role_vars, tmp_path)
    assert first.rc == 0, first.explain()
    assert meminfo_total() == want
    assert f"vm.nr_hugepages={want}" in (tmp_path / "60-hugepages.conf").read_text()
    assert f"HugePages_Total = {want} (2 MB)" in first.messages()

    second = run_role(venv_bin, "hugepages", role_vars, tmp_path)
    assert second.rc == 0, second.explain()
    assert second.changed == 0, second.changed_tasks()


def test_hugepages_thp_policy_on_fixture_sysfs(venv_bin, tmp_path):
    thp = tmp_path / "sys/kernel/mm/transparent_hugepage/enabled"
    thp.parent.mkdir(parents=True)
    thp.write_text("always [madvise] never\n")
    role_vars = {"hugepages_thp_enabled": "never", "hugepages_sysfs_root": str(tmp_path / "sys"),
                 "hugepages_tmpfiles_file": str(tmp_path / "thp.conf")}
    run = run_role(venv_bin, "hugepages", role_vars, tmp_path)
    assert run.rc == 0, run.explain()
    assert thp.read_text() == "never"
    assert "w /sys/kernel/mm/transparent_hugepage/enabled - - - - never" in (tmp_path / "thp.conf").read_text()


def test_hugepages_rejects_non_2m_default_size(venv_bin, tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("HugePages_Total:       0\nHugepagesize:    1048576 kB\n")
    run = run_role(venv_bin, "hugepages", {"hugepages_2m_count": 16, "hugepages_meminfo": str(meminfo),
                                           "hugepages_sysctl_file": str(tmp_path / "hp.conf")}, tmp_path)
    assert run.rc != 0
    assert "default huge page size" in run.messages()
    assert not (tmp_path / "hp.conf").exists()


# --- lustre_striping -------------------------------------------------------------

def test_lustre_striping_skips_without_lfs(venv_bin, tmp_path):
    run = run_role(venv_bin, "lustre_striping",
                   {"lustre_striping_lfs": "lfs-not-installed-here",
                    "lustre_striping_dirs": [{"path": str(tmp_path / "out"), "count": 8, "size": "4M"}]}, tmp_path)
    assert run.rc == 0, run.explain()
    assert run.changed == 0
    assert "not found on localhost (no Lustre client); striping skipped" in run.messages()
    assert not (tmp_path / "out").exists()


def test_lustre_striping_compares_before_setting(venv_bin, tmp_path, monkeypatch):
    log = tmp_path / "lfs.log"
    monkeypatch.setenv("FAKE_LFS_LOG", str(log))
    dirs = [{"path": str(tmp_path / "output"), "count": 8, "size": "4M"},
            {"path": str(tmp_path / "output-large"), "count": 8, "size": "16M"}]
    role_vars = {"lustre_striping_lfs": str(FIXTURES / "fake_lfs.py"), "lustre_striping_dirs": dirs}

    first = run_role(venv_bin, "lustre_striping", role_vars, tmp_path)
    assert first.rc == 0, first.explain()
    sets = [line for line in log.read_text().splitlines() if line.startswith("setstripe")]
    assert sets == [f"setstripe -c 8 -S 4M {tmp_path / 'output'}", f"setstripe -c 8 -S 16M {tmp_path / 'output-large'}"]
    assert (tmp_path / "output/.fake-lfs-layout").read_text().split() == ["8", str(4 << 20)]

    log.write_text("")
    second = run_role(venv_bin, "lustre_striping", role_vars, tmp_path)
    assert second.rc == 0, second.explain()
    assert second.changed == 0, second.changed_tasks()
    assert [line.split()[0] for line in log.read_text().splitlines()] == ["getstripe", "getstripe"]
    assert f"{tmp_path / 'output'}: ok" in second.messages()
