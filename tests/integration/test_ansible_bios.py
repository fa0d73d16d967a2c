"""bios role against real Redfish services on loopback.

- sushy-tools' emulator (libvirt test:///default driver) over TLS with a
  self-signed certificate: the BMC most tests in the wild use. It applies
  BIOS writes at once and accepts any attribute name, so it shows that the
  role itself rejects unknown names.
- redfish_mock.py (ansible_fixtures/): a small stand-in that keeps writes
  pending in Bios/Settings until ComputerSystem.Reset, as real BMCs do, to
  show that a re-run before the reboot does not apply again.

The OS-level check reads fixture sysfs trees built in tmp_path.
"""
from __future__ import annotations

import json
import pathlib
import ssl
import subprocess
import sys
import time
import urllib.request

import pytest

from ansible_helpers import FIXTURES, free_port, make_cert, make_sysfs, run_role  # noqa: E402

BMC_USER, BMC_PASSWORD = "bmc-admin", "s3cret-bmc-pw"


def _wait_https(url: str, cafile: pathlib.Path, proc: subprocess.Popen, timeout=30.0) -> None:
    ctx = ssl.create_default_context(cafile=str(cafile))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early: {proc.stdout.read() if proc.stdout else ''}")
        try:
            with urllib.request.urlopen(url, context=ctx, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout}s")


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Bmc:
    def __init__(self, port: int, cafile: pathlib.Path):
        self.address = f"127.0.0.1:{port}"
        self.cafile = cafile
        self.ctx = ssl.create_default_context(cafile=str(cafile))

    def request(self, path: str, method="GET", body: dict | None = None):
        req = urllib.request.Request(f"https://{self.address}{path}", method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, context=self.ctx, timeout=10) as resp:
            raw = resp.read()
            return json.loads(raw) if raw else None

    def role_vars(self, **extra) -> dict:
        return {"bios_method": "redfish", "bios_bmc_address": self.address,
                "bios_bmc_username": BMC_USER, "bios_bmc_password": BMC_PASSWORD,
                "bios_bmc_ca_path": str(self.cafile), "bios_reboot_delay": 0,
                "bios_verify_retries": 0, "bios_verify_delay": 0, **extra}


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return make_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def sushy(tls, tmp_path_factory):
    """sushy-emulator on 127.0.0.1 with libvirt's in-process test driver."""
    exe = pathlib.Path(sys.executable).parent / "sushy-emulator"
    if not exe.exists():
        pytest.skip("sushy-emulator not installed in the venv")
    try:
        import libvirt  # noqa: F401
    except ImportError:
        pytest.skip("python3-libvirt not installed (sushy's libvirt driver needs it)")
    cert, key = tls
    port = free_port()
    proc = subprocess.Popen([str(exe), "-i", "127.0.0.1", "-p", str(port), "--ssl-certificate", str(cert),
                             "--ssl-key", str(key), "--libvirt-uri", "test:///default"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_https(f"https://127.0.0.1:{port}/redfish/v1/Systems", cert, proc)
        bmc = Bmc(port, cert)
        members = bmc.request("/redfish/v1/Systems")["Members"]
        bmc.system = members[0]["@odata.id"]
        # sushy's default BIOS has no SMT/NUMA knobs; give it the Dell-style
        # attributes the vendor map's "sushy emulator" entry uses.
        bmc.request(f"{bmc.system}/BIOS/Settings", "PATCH",
                    {"Attributes": {"LogicalProc": "Enabled", "NumaNodesPerSocket": "1"}})
        yield bmc
    finally:
        _stop(proc)


@pytest.fixture
def mock_bmc(tls):
    """Fresh redfish_mock.py per test (state = a Dell box with AMD CPUs)."""
    cert, key = tls
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(FIXTURES / "redfish_mock.py"), "--port", str(port),
                             "--cert", str(cert), "--key", str(key),
                             "--user", BMC_USER, "--password", BMC_PASSWORD],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_https(f"https://127.0.0.1:{port}/mock/state", cert, proc)
        bmc = Bmc(port, cert)
        bmc.state = lambda: bmc.request("/mock/state")
        yield bmc
    finally:
        _stop(proc)


def sushy_bios(bmc) -> dict:
    return bmc.request(f"{bmc.system}/BIOS")["Attributes"]


def test_sushy_correct_change_then_no_change(sushy, venv_bin, tmp_path):
    """SMT off + NPS2 + a raw attribute are set, verified on the BMC and in sysfs; a re-run changes nothing."""
    before = sushy_bios(sushy)
    assert before["LogicalProc"] == "Enabled" and before["NumaNodesPerSocket"] == "1"
    sysfs = make_sysfs(tmp_path / "sys", sockets=2, numa_nodes=4)  # 2 sockets x NPS2, SMT off in BIOS
    role_vars = sushy.role_vars(bios_smt=False, bios_nps=2, bios_sysfs_root=str(sysfs),
                                bios_extra_attributes={"ProcTurboMode": "Disabled"})

    first = run_role(venv_bin, "bios", role_vars, tmp_path)
    assert first.rc == 0, first.explain()
    after = sushy_bios(sushy)
    assert after["LogicalProc"] == "Disabled"
    assert after["NumaNodesPerSocket"] == "2"
    assert after["ProcTurboMode"] == "Disabled"
    msgs = first.messages()
    assert "LogicalProc: Enabled -> Disabled" in msgs
    assert "NumaNodesPerSocket: 1 -> 2" in msgs
    assert "4 NUMA node(s) = 2 socket(s) x NPS2" in msgs
    assert any("3. set" in t for t in first.changed_tasks())
    assert any("4. graceful restart" in t for t in first.changed_tasks())

    second = run_role(venv_bin, "bios", role_vars, tmp_path)
    assert second.rc == 0, second.explain()
    assert second.changed == 0, second.changed_tasks()
    assert "LogicalProc: Disabled (ok)" in second.messages()


def test_sushy_unknown_attribute_fails_and_sets_nothing(sushy, venv_bin, tmp_path):
    """redfish_config would only warn; the role refuses before writing anything."""
    before = sushy_bios(sushy)
    role_vars = sushy.role_vars(bios_smt=True, bios_verify_os=False,
                                bios_extra_attributes={"NoSuchKnob": "Enabled"})
    run = run_role(venv_bin, "bios", role_vars, tmp_path)
    assert run.rc != 0
    assert "unknown BIOS attribute(s) NoSuchKnob" in run.messages()
    after = sushy_bios(sushy)
    # sushy stores any name it is sent: its absence proves nothing was written.
    assert "NoSuchKnob" not in after
    assert after == before


def test_check_mode_shows_diff_and_changes_nothing(sushy, venv_bin, tmp_path):
    before = sushy_bios(sushy)
    want_smt = before["LogicalProc"] != "Enabled"   # flip whatever the previous test left
    role_vars = sushy.role_vars(bios_smt=want_smt, bios_verify_os=False)
    run = run_role(venv_bin, "bios", role_vars, tmp_path, check=True)
    assert run.rc == 0, run.explain()
    expected = "Enabled" if want_smt else "Disabled"
    assert f"LogicalProc: {before['LogicalProc']} -> {expected}" in run.messages()
    assert sushy_bios(sushy) == before


def test_rerun_before_reboot_does_not_apply_again(mock_bmc, venv_bin, tmp_path):
    """Pending settings (Bios/Settings) count as done until the reset applies them."""
    sysfs = make_sysfs(tmp_path / "sys", sockets=2, numa_nodes=8)  # 2 x NPS4
    wanted = {"bios_smt": False, "bios_nps": 4, "bios_sysfs_root": str(sysfs)}

    first = run_role(venv_bin, "bios", mock_bmc.role_vars(bios_reboot=False, **wanted), tmp_path)
    assert first.rc == 0, first.explain()
    state = mock_bmc.state()
    assert state["patches"] == 1 and state["resets"] == 0
    assert state["pending"] == {"LogicalProc": "Disabled", "NumaNodesPerSocket": "4"}
    assert state["current"]["LogicalProc"] == "Enabled"
    assert "settings stay pending until the next reboot" in first.messages()

    second = run_role(venv_bin, "bios", mock_bmc.role_vars(bios_reboot=False, **wanted), tmp_path)
    assert second.rc == 0, second.explain()
    assert mock_bmc.state()["patches"] == 1, "pending values were written again"
    assert second.changed == 0, second.changed_tasks()
    assert "LogicalProc: Enabled -> Disabled (pending until reset, not set again)" in second.messages()

    third = run_role(venv_bin, "bios", mock_bmc.role_vars(bios_reboot=True, **wanted), tmp_path)
    assert third.rc == 0, third.explain()
    state = mock_bmc.state()
    assert state["patches"] == 1 and state["resets"] == 1
    assert state["pending"] == {}
    assert state["current"]["LogicalProc"] == "Disabled"
    assert state["current"]["NumaNodesPerSocket"] == "4"
    assert "8 NUMA node(s) = 2 socket(s) x NPS4" in third.messages()


def test_wrong_nps_for_shape_fails_before_any_request(mock_bmc, venv_bin, tmp_path):
    role_vars = mock_bmc.role_vars(bios_shape="BM.Optimized3.36", bios_nps=4, bios_smt=False)
    run = run_role(venv_bin, "bios", role_vars, tmp_path)
    assert run.rc != 0
    assert "NPS4 is not supported on BM.Optimized3.36 (allowed: NPS1, NPS2)" in run.messages()
    state = mock_bmc.state()
    assert state["requests"] == 0 and state["patches"] == 0 and state["pending"] == {}


def test_an_absent_resource_id_is_named_with_the_ids_the_bmc_has(mock_bmc, venv_bin, tmp_path):
    """[issue 12] "No first item, sequence was empty" before."""
    role_vars = mock_bmc.role_vars(bios_bmc_resource_id="System.Embedded.2", bios_smt=False,
                                   bios_verify_os=False)
    run = run_role(venv_bin, "bios", role_vars, tmp_path)
    assert run.rc != 0
    assert (f"bios: bios_bmc_resource_id 'System.Embedded.2' of localhost is not a ComputerSystem "
            f"of the BMC at {mock_bmc.address}; it has: System.Embedded.1. Nothing was changed."
            ) in run.messages()
    assert "No first item" not in run.messages() + run.stderr
    assert mock_bmc.state()["patches"] == 0 and mock_bmc.state()["resets"] == 0


def test_nps_the_vendor_cannot_express_fails(mock_bmc, venv_bin, tmp_path):
    """HPE has no NPS0 spelling in the map: a clear error and no write."""
    role_vars = mock_bmc.role_vars(bios_nps=0, bios_manufacturer="HPE", bios_verify_os=False)
    run = run_role(venv_bin, "bios", role_vars, tmp_path)
    assert run.rc != 0
    assert "NPS0 is not settable on hpe/" in run.messages()
    assert mock_bmc.state()["patches"] == 0


# --- OCI: launch-time platform_config, no BMC ---------------------------------

def oci_vars(sysfs, **extra):
    return {"bios_method": "oci", "bios_shape": "BM.Optimized3.36", "bios_sysfs_root": str(sysfs), **extra}


def test_oci_wrong_nps_for_shape_is_a_clear_error(venv_bin, tmp_path):
    sysfs = make_sysfs(tmp_path / "sys", sockets=2, numa_nodes=2)
    before = sorted(p.relative_to(sysfs) for p in sysfs.rglob("*"))
    run = run_role(venv_bin, "bios", oci_vars(sysfs, bios_nps=4, bios_smt=False), tmp_path)
    assert run.rc != 0
    msgs = run.messages()
    assert "NPS4 is not supported on BM.Optimized3.36 (allowed: NPS1, NPS2)" in msgs
    assert "platform_config" not in msgs   # stopped before printing launch settings
    assert sorted(p.relative_to(sysfs) for p in sysfs.rglob("*")) == before


def test_oci_prints_platform_config_and_verifies_node(venv_bin, tmp_path):
    sysfs = make_sysfs(tmp_path / "sys", sockets=2, numa_nodes=2)  # [OCI-OpenFOAM]: NPS1, SMT off
    run = run_role(venv_bin, "bios", oci_vars(sysfs, bios_nps=1, bios_smt=False), tmp_path)
    assert run.rc == 0, run.explain()
    assert run.changed == 0
    line = next(m for m in run.messages().splitlines() if "--platform-config" in m)
    config = json.loads(line.split("--platform-config '", 1)[1].rstrip("'"))
    assert config == {"type": "INTEL_ICELAKE_BM", "numaNodesPerSocket": "NPS1",
                      "isSymmetricMultiThreadingEnabled": False}
    assert "2 NUMA node(s) = 2 socket(s) x NPS1" in run.messages()


@pytest.mark.parametrize(("nodes", "smt_control", "smt_active", "error"), [
    (2, "notsupported", "0", "has 2 NUMA node(s)"),         # NPS2 did not take effect
    (4, "on", "1", "SMT should be off in the BIOS"),         # SMT still on
    (4, "off", "0", "smt/control is 'off'"),                 # only runtime-off: BIOS still on
])
def test_os_check_catches_settings_that_did_not_apply(venv_bin, tmp_path, nodes, smt_control, smt_active, error):
    sysfs = make_sysfs(tmp_path / "sys", sockets=2, numa_nodes=nodes, smt_control=smt_control,
                       smt_active=smt_active)
    run = run_role(venv_bin, "bios", oci_vars(sysfs, bios_shape="BM.Standard.E4.128", bios_nps=2,
                                              bios_smt=False), tmp_path)
    assert run.rc != 0
    assert error in run.messages()


def test_nps0_means_one_node_for_the_whole_machine(venv_bin, tmp_path):
    sysfs = make_sysfs(tmp_path / "sys", sockets=2, numa_nodes=1, smt_control="on", smt_active="1")
    run = run_role(venv_bin, "bios", oci_vars(sysfs, bios_shape="BM.Standard.E4.128", bios_nps=0,
                                              bios_smt=True), tmp_path)
    assert run.rc == 0, run.explain()
    assert "1 NUMA node(s) = 2 socket(s) x NPS0" in run.messages()
    assert '"type": "AMD_MILAN_BM"' in run.messages()


def test_no_bmc_skips_with_a_message(venv_bin, tmp_path):
    run = run_role(venv_bin, "bios", {"bios_method": "none", "bios_smt": False}, tmp_path)
    assert run.rc == 0 and run.changed == 0
    assert "no BMC" in run.messages()

