"""Pure-Python checks of the bios role's planning and topology modules."""
from __future__ import annotations

import importlib.util
import pathlib

import pytest
import yaml

ROLE = pathlib.Path(__file__).resolve().parents[2] / "ansible/roles/bios"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROLE / "library" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


plan_mod = _load("iostack_bios_plan")
topo_mod = _load("iostack_numa_topology")
MAPS = yaml.safe_load((ROLE / "defaults/main.yml").read_text())["bios_vendor_maps"]
DEFAULTS = yaml.safe_load((ROLE / "defaults/main.yml").read_text())


@pytest.mark.parametrize(("manufacturer", "cpu", "smt", "nps", "expected"), [
    ("Dell Inc.", "AMD", False, 2, {"LogicalProc": "Disabled", "NumaNodesPerSocket": "2"}),
    ("Dell Inc.", "Advanced Micro Devices, Inc.", True, 0, {"LogicalProc": "Enabled", "NumaNodesPerSocket": "0"}),
    ("HPE", "AMD", False, 4, {"ProcSMT": "Disabled", "NumaMemoryDomainsPerSocket": "FourMemoryDomainsPerSocket"}),
    ("HPE", "Intel(R) Corporation", False, None, {"ProcHyperthreading": "Disabled"}),
    ("Supermicro", "AMD", False, 1, {"SMTControl": "Disabled", "NUMANodesPerSocket": "NPS1"}),
    ("Sushy Emulator", "N/A", False, 4, {"LogicalProc": "Disabled", "NumaNodesPerSocket": "4"}),
])
def test_vendor_maps_give_vendor_spellings(manufacturer, cpu, smt, nps, expected):
    assert plan_mod.wanted_attributes(MAPS, manufacturer, cpu, smt, nps, {}) == expected


@pytest.mark.parametrize(("manufacturer", "cpu", "smt", "nps", "error"), [
    ("HPE", "AMD", None, 0, "NPS0 is not settable on hpe/AMD"),
    ("Dell Inc.", "Intel", None, 2, "no NPS attribute known for dell/Intel"),
    ("Lenovo", "AMD", False, None, "no bios_vendor_maps entry matches manufacturer 'Lenovo'"),
    ("Supermicro", "Intel", False, None, "has no CPU vendor 'Intel'"),
])
def test_vendor_maps_refuse_what_they_cannot_express(manufacturer, cpu, smt, nps, error):
    with pytest.raises(plan_mod.PlanError, match=error):
        plan_mod.wanted_attributes(MAPS, manufacturer, cpu, smt, nps, {})


def test_nothing_requested_needs_no_vendor_entry():
    assert plan_mod.wanted_attributes(MAPS, "Unknown BMC", "", None, None, {"BootMode": "Uefi"}) == {"BootMode": "Uefi"}


def test_extra_attribute_may_not_contradict_mapped_one():
    with pytest.raises(plan_mod.PlanError, match="contradicts"):
        plan_mod.wanted_attributes(MAPS, "Dell Inc.", "AMD", False, None, {"LogicalProc": "Enabled"})


def test_plan_splits_ok_pending_and_to_set():
    current = {"LogicalProc": "Enabled", "NumaNodesPerSocket": "1", "ProcTurboMode": "Enabled"}
    pending = {"NumaNodesPerSocket": "4"}
    wanted = {"LogicalProc": "Disabled", "NumaNodesPerSocket": "4", "ProcTurboMode": "Enabled"}
    result = plan_mod.plan(wanted, current, pending)
    assert result["to_set"] == {"LogicalProc": "Disabled"}
    assert result["pending"] == {"NumaNodesPerSocket": "4"}
    assert result["reboot_needed"] is True
    assert result["plan"] == ["LogicalProc: Enabled -> Disabled",
                              "NumaNodesPerSocket: 1 -> 4 (pending until reset, not set again)",
                              "ProcTurboMode: Enabled (ok)"]


def test_plan_pending_with_other_value_is_set_again():
    result = plan_mod.plan({"NumaNodesPerSocket": "2"}, {"NumaNodesPerSocket": "1"}, {"NumaNodesPerSocket": "4"})
    assert result["to_set"] == {"NumaNodesPerSocket": "2"} and result["pending"] == {}


def test_plan_nothing_to_do():
    result = plan_mod.plan({"LogicalProc": "Enabled"}, {"LogicalProc": "Enabled"}, {})
    assert result["to_set"] == {} and result["reboot_needed"] is False


def test_plan_rejects_unknown_names_and_types_matter():
    with pytest.raises(plan_mod.PlanError, match="unknown BIOS attribute.*NoSuchKnob"):
        plan_mod.plan({"NoSuchKnob": "x", "LogicalProc": "Enabled"}, {"LogicalProc": "Enabled"}, {})
    # "1" and 1 differ on the wire: a BMC with integer attributes needs integers.
    assert plan_mod.plan({"Cores": 1}, {"Cores": "1"}, {})["to_set"] == {"Cores": 1}


def test_shape_table_matches_issue():
    assert DEFAULTS["bios_shape_nps"]["BM.Optimized3.36"] == [1, 2]
    assert DEFAULTS["bios_shape_nps"]["BM.Standard.E4.128"] == [0, 1, 2, 4]


def _sysfs(root, nodes, cpus_per_pkg, pkgs, control=None, active=None):
    for n in range(nodes):
        (root / f"devices/system/node/node{n}").mkdir(parents=True)
    (root / "devices/system/node/possible").write_text("0\n")
    for c in range(cpus_per_pkg * pkgs):
        t = root / f"devices/system/cpu/cpu{c}/topology"
        t.mkdir(parents=True)
        (t / "physical_package_id").write_text(f"{c // cpus_per_pkg}\n")
    (root / "devices/system/cpu/cpufreq").mkdir()
    if control is not None:
        (root / "devices/system/cpu/smt").mkdir()
        (root / "devices/system/cpu/smt/control").write_text(control + "\n")
        (root / "devices/system/cpu/smt/active").write_text(active + "\n")
    return root


def test_topology_counts_nodes_and_packages(tmp_path):
    root = _sysfs(tmp_path, nodes=8, cpus_per_pkg=3, pkgs=2, control="notsupported", active="0")
    topo = topo_mod.read_topology(str(root))
    assert topo["numa_nodes"] == 8 and topo["sockets"] == 2
    assert topo["smt_control"] == "notsupported" and topo["smt_active"] == "0"


def test_topology_without_smt_files(tmp_path):
    topo = topo_mod.read_topology(str(_sysfs(tmp_path, nodes=1, cpus_per_pkg=2, pkgs=1)))
    assert topo["numa_nodes"] == 1 and topo["sockets"] == 1
    assert topo["smt_control"] is None and topo["smt_active"] is None

