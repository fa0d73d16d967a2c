"""The whole playbook and its tooling: check-mode plan on the local site,
inventory layering per site, ansible-lint and yamllint."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest

from ansible_helpers import ANSIBLE_DIR, ansible_env, run_playbook  # noqa: E402

SITES = ("local", "cray-ex", "oci-bm-optimized3")


def _machine_state(repo: pathlib.Path) -> dict:
    """Things a real (non-check) run of the local site would change."""
    paths = ["/etc/profile.d/iostack-modules.sh", "/etc/systemd/system/iostack-nightly.service",
             "/etc/systemd/system/iostack-nightly.timer", "/etc/tmpfiles.d/iostack-nightly.conf",
             "/var/lib/iostack", str(repo / "deploy/local")]
    return {
        # the nightly's service account (reframe_nightly_user)
        "account": subprocess.run(["getent", "passwd", "iostack"], capture_output=True).returncode,
        "exists": {p: os.path.exists(p) for p in paths},
        "nr_hugepages": pathlib.Path("/proc/sys/vm/nr_hugepages").read_text(),
        "fstab": pathlib.Path("/etc/fstab").read_bytes() if os.path.exists("/etc/fstab") else b"",
    }


def test_local_site_check_mode_shows_a_plan_and_changes_nothing(repo, venv_bin, tmp_path):
    before = _machine_state(repo)
    run = run_playbook(venv_bin, ANSIBLE_DIR / "site.yml", {}, tmp_path, check=True,
                       inventory=ANSIBLE_DIR / "inventories/local")
    assert run.rc == 0, run.explain()
    assert run.failed == 0
    msgs = run.messages()
    for expected in ("bios: bios_method is 'none' on localhost (no BMC)",
                     "smt: smt_enabled is null on localhost",
                     "nvme_scratch: nvme_scratch_devices is empty for localhost",
                     "spack_stack: spack at ",
                     "would run: SPACK_ROOT=",
                     f"{repo}/bin/iostack deploy --site local --root {repo}/deploy/local"):
        assert expected in msgs, f"missing plan line: {expected}"
    assert _machine_state(repo) == before


@pytest.mark.parametrize("site", SITES)
def test_inventory_layers_common_then_site_then_group(repo, venv_bin, site):
    proc = subprocess.run([str(venv_bin / "ansible-inventory"), "-i", str(ANSIBLE_DIR / "inventories" / site),
                           "--list"], capture_output=True, text=True, env=ansible_env(venv_bin), check=True)
    inv = json.loads(proc.stdout)
    hostvars = inv["_meta"]["hostvars"]
    compute = sorted(set(inv["compute"].get("hosts", [])) |
                     {h for child in inv["compute"].get("children", []) for h in inv[child].get("hosts", [])})
    assert compute, f"{site}: no compute hosts"
    deploy = inv["deploy"]["hosts"]
    for host in compute + deploy:
        hv = hostvars[host]
        assert hv["iostack_site"] == site               # site layer
        assert hv["nvme_scratch_mount"] == "/mnt/localdisk"   # common layer
    if site == "local":
        assert hostvars["localhost"]["ansible_connection"] == "local"
    else:
        assert hostvars[compute[0]]["iostack_root"] != "/opt/iostack"   # site overrides common
    if site == "oci-bm-optimized3":
        hv = hostvars[compute[0]]
        assert (hv["bios_method"], hv["bios_shape"], hv["bios_nps"], hv["bios_smt"]) == \
            ("oci", "BM.Optimized3.36", 1, False)
        assert "bios_method" not in hostvars[deploy[0]]      # group layer only for compute
    if site == "cray-ex":
        hv = hostvars[compute[0]]
        # ARCHER2 runs SMT on, NPS4 [ARCHER2-Hardware]; changes go through Slurm
        assert (hv["bios_method"], hv["bios_nps"], hv["bios_smt"]) == ("redfish", 4, True)
        assert (hv["bios_reboot_via"], hv["bios_slurm_delegate"]) == ("slurm", deploy[0])
        assert [d["size"] for d in hv["lustre_striping_dirs"]] == ["4M", "16M"]


def test_ansible_lint_and_yamllint_pass(venv_bin):
    env = ansible_env(venv_bin)
    env.pop("ANSIBLE_STDOUT_CALLBACK")
    env["NO_COLOR"] = "1"
    yl = subprocess.run([str(venv_bin / "yamllint"), "-s", "."], cwd=ANSIBLE_DIR, capture_output=True,
                        text=True, env=env)
    assert yl.returncode == 0, yl.stdout + yl.stderr
    al = subprocess.run([str(venv_bin / "ansible-lint"), "--offline", "--format=pep8"], cwd=ANSIBLE_DIR,
                        capture_output=True, text=True, env=env, timeout=300)
    assert al.returncode == 0, al.stdout + al.stderr
    assert "Profile 'production' was required, and it passed" in al.stdout + al.stderr


@pytest.mark.parametrize("typo", ["inventory path", "group name"])
def test_a_mistyped_inventory_fails_before_any_play(venv_bin, tmp_path, typo):
    """[issue 12] A mistyped inventory skipped every play ("no hosts matched") with rc 0."""
    if typo == "inventory path":
        inventory = ANSIBLE_DIR / "inventories" / "cray-exx"
        groups = "none"
    else:
        inventory = tmp_path / "hosts.yml"
        inventory.write_text("all:\n  children:\n    computee:\n      hosts:\n        nid001:\n"
                             "    deploy:\n      hosts:\n        uan01:\n")
        groups = "computee, deploy"
    run = run_playbook(venv_bin, ANSIBLE_DIR / "site.yml", {}, tmp_path, check=True,
                       inventory=inventory)
    assert run.rc != 0
    assert (f"site.yml: no host in group 'compute' of inventory {inventory}; groups there: "
            f"{groups}.") in run.messages()
    plays = [p["play"]["name"] for p in run.data.get("plays", [])]
    assert plays == ["Check that the inventory has hosts for every play"]
