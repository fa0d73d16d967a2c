#!/usr/bin/python
# Pure planning step of the bios role: vendor attribute names, unknown-name
# check, and current/pending/wanted diff. It talks to nothing and changes
# nothing, so it runs the same in check mode.
from __future__ import annotations

DOCUMENTATION = r"""
module: iostack_bios_plan
short_description: Plan BIOS attribute changes from current and pending settings
description:
  - Maps I(smt)/I(nps) to the vendor's attribute names and values, rejects
    attribute names the BMC does not have, and splits the wanted attributes
    into already set, already pending (set but not yet applied by a reset)
    and still to set.
options:
  manufacturer: {description: Redfish system Manufacturer., type: str, required: true}
  cpu_vendor: {description: CPU vendor (AMD, Intel or the raw Redfish string)., type: str, default: ""}
  vendor_maps: {description: The role's bios_vendor_maps., type: list, elements: dict, required: true}
  smt: {description: Wanted SMT state; null leaves it., type: bool}
  nps: {description: Wanted NUMA nodes per socket; null leaves it., type: int}
  extra_attributes: {description: Raw attributes to set as well., type: dict, default: {}}
  current: {description: Current BIOS attributes (Bios resource)., type: dict, required: true}
  pending: {description: Attributes of the Bios/Settings resource., type: dict, default: {}}
author: iostack
"""

RETURN = r"""
wanted: {description: Attribute name to wanted value., type: dict, returned: success}
to_set: {description: Attributes that must be written., type: dict, returned: success}
pending: {description: Wanted attributes already pending until the next reset., type: dict, returned: success}
reboot_needed: {description: Whether a reset is needed to apply wanted values., type: bool, returned: success}
plan: {description: One readable line per wanted attribute., type: list, returned: success}
"""

from ansible.module_utils.basic import AnsibleModule


class PlanError(Exception):
    pass


def normalise_cpu_vendor(raw):
    low = (raw or "").lower()
    if "amd" in low or "advanced micro" in low:
        return "AMD"
    if "intel" in low:
        return "Intel"
    return raw or ""


def vendor_entry(vendor_maps, manufacturer, cpu_vendor):
    """Return (map name, per-CPU entry) for a manufacturer and CPU vendor."""
    manu = (manufacturer or "").lower()
    for entry in vendor_maps:
        if entry.get("match", "").lower() in manu and entry.get("match"):
            cpus = entry.get("cpus", {})
            cpu = normalise_cpu_vendor(cpu_vendor)
            if cpu in cpus:
                return entry["match"], cpus[cpu]
            if "any" in cpus:
                return entry["match"], cpus["any"]
            raise PlanError(
                f"bios_vendor_maps entry '{entry['match']}' has no CPU vendor '{cpu or '?'}' "
                f"(has: {', '.join(sorted(cpus))}); set bios_cpu_vendor or extend the map")
    raise PlanError(f"no bios_vendor_maps entry matches manufacturer '{manufacturer}'")


def wanted_attributes(vendor_maps, manufacturer, cpu_vendor, smt, nps, extra):
    wanted = {}
    if smt is not None or nps is not None:
        name, cpu_map = vendor_entry(vendor_maps, manufacturer, cpu_vendor)
        if smt is not None:
            spec = cpu_map.get("smt")
            if not spec:
                raise PlanError(f"no SMT attribute known for {name}/{cpu_vendor}")
            wanted[spec["attribute"]] = spec["on" if smt else "off"]
        if nps is not None:
            spec = cpu_map.get("nps")
            if not spec:
                raise PlanError(f"no NPS attribute known for {name}/{cpu_vendor}")
            values = {int(k): v for k, v in spec["values"].items()}
            if int(nps) not in values:
                raise PlanError(
                    f"NPS{nps} is not settable on {name}/{cpu_vendor} "
                    f"({spec['attribute']} supports NPS{', NPS'.join(str(k) for k in sorted(values))})")
            wanted[spec["attribute"]] = values[int(nps)]
    for key, value in (extra or {}).items():
        if key in wanted and wanted[key] != value:
            raise PlanError(f"bios_extra_attributes sets {key}={value!r}, which contradicts {wanted[key]!r}")
        wanted[key] = value
    return wanted


def plan(wanted, current, pending):
    unknown = sorted(k for k in wanted if k not in current)
    if unknown:
        raise PlanError(
            f"unknown BIOS attribute(s) {', '.join(unknown)}: the BMC has no such attribute "
            "(redfish_config would only warn and skip it). Nothing was changed.")
    to_set, already_pending, lines = {}, {}, []
    for key in sorted(wanted):
        want, cur = wanted[key], current[key]
        if cur == want:
            lines.append(f"{key}: {cur!s} (ok)")
        elif key in pending and pending[key] == want:
            already_pending[key] = want
            lines.append(f"{key}: {cur!s} -> {want!s} (pending until reset, not set again)")
        else:
            to_set[key] = want
            lines.append(f"{key}: {cur!s} -> {want!s}")
    return {
        "wanted": wanted,
        "to_set": to_set,
        "pending": already_pending,
        "reboot_needed": bool(to_set or already_pending),
        "plan": lines,
    }


def main():
    module = AnsibleModule(
        argument_spec={
            "manufacturer": {"type": "str", "required": True},
            "cpu_vendor": {"type": "str", "default": ""},
            "vendor_maps": {"type": "list", "elements": "dict", "required": True},
            "smt": {"type": "bool"},
            "nps": {"type": "int"},
            "extra_attributes": {"type": "dict", "default": {}},
            "current": {"type": "dict", "required": True},
            "pending": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        wanted = wanted_attributes(p["vendor_maps"], p["manufacturer"], p["cpu_vendor"],
                                   p["smt"], p["nps"], p["extra_attributes"])
        result = plan(wanted, p["current"], p["pending"] or {})
    except PlanError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
