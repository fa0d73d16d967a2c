#!/usr/bin/python
# Read-only safety inspection for the nvme_scratch role. It decides, per
# listed device, whether the role may use it; all writes happen in tasks
# that run only after this module has passed the device.
from __future__ import annotations

DOCUMENTATION = r"""
module: iostack_scratch_inspect
short_description: Decide which scratch devices are safe to format
description:
  - Resolves each listed device (stable /dev/disk/by-id path, serial or WWN;
    plain kernel paths only when I(allow_plain_paths) is set), then reads
    C(lsblk -J), C(blkid -p), C(wipefs -n -J), C(findmnt), /proc/mounts,
    /proc/swaps and sysfs holders. Changes nothing.
  - C(refused) devices must never be touched (root/boot disk, mounted,
    in use, not a whole disk, foreign data without I(force)).
    C(to_wipe) devices carry signatures or partitions and are only listed
    when I(force) is set. C(ours) devices already carry the role's
    filesystem (or md membership); C(fresh) devices are blank.
options:
  devices:
    description: Device specs; a path string or a dict with one of path, serial, wwn.
    type: list
    elements: raw
    required: true
  allow_plain_paths:
    description: Accept /dev/<name> paths (tests with loop devices).
    type: bool
    default: false
  force:
    description: Allow wiping devices with signatures or partitions (never root/boot or mounted ones).
    type: bool
    default: false
  label:
    description: Filesystem label the role gives its XFS filesystem.
    type: str
    required: true
  md_name:
    description: Name of the md array for several devices.
    type: str
    required: true
  mount_point:
    description: Where the role mounts the scratch filesystem.
    type: path
    required: true
author: iostack
"""

RETURN = r"""
devices:
  description: One entry per listed device with path, spec, size, signatures, verdict and reasons.
  type: list
  returned: always
summary: {description: One readable line per device (spec, path, verdict, reasons)., type: list, returned: always}
refused: {description: Devices that must not be touched, with reasons., type: list, returned: always}
to_wipe: {description: Devices whose signatures/partitions force would destroy., type: list, returned: always}
protected_disks: {description: Disks that back /, /boot or /boot/efi., type: list, returned: always}
"""

import json
import os
import stat

from ansible.module_utils.basic import AnsibleModule

STABLE_PREFIX = "/dev/disk/by-id/"
PROTECTED_MOUNTS = ("/", "/boot", "/boot/efi")


class Probe:
    """Runs the read-only commands; swapped out in unit tests."""

    def __init__(self, module):
        self.module = module

    def run(self, args):
        rc, out, err = self.module.run_command(args)
        return rc, out, err

    def lsblk(self, dev=None, inverse=False):
        args = ["lsblk", "-J", "-b", "-p", "-o",
                "NAME,KNAME,PKNAME,TYPE,SIZE,FSTYPE,UUID,LABEL,MOUNTPOINTS,SERIAL,WWN"]
        if inverse:
            args.append("-s")
        if dev:
            args.append(dev)
        rc, out, err = self.run(args)
        if rc != 0:
            return []
        return json.loads(out).get("blockdevices", [])

    def blkid(self, dev):
        rc, out, _ = self.run(["blkid", "-p", "-o", "export", dev])
        info = {}
        if rc == 0:
            for line in out.splitlines():
                key, _, value = line.partition("=")
                if key:
                    info[key] = value
        return info

    def wipefs(self, dev):
        rc, out, err = self.run(["wipefs", "-n", "-J", dev])
        if rc != 0:
            # Unreadable device: treat as foreign data, never as blank.
            return [{"type": "unreadable", "offset": "?", "error": err.strip()}]
        if not out.strip():
            return []
        return json.loads(out).get("signatures", [])

    def findmnt_source(self, target):
        rc, out, _ = self.run(["findmnt", "-n", "-e", "-o", "SOURCE", "--target", target])
        return out.strip() if rc == 0 else ""

    def read(self, path):
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read()
        except OSError:
            return ""

    def holders(self, kname):
        base = os.path.basename(kname)
        try:
            return sorted(os.listdir(f"/sys/class/block/{base}/holders"))
        except OSError:
            return []

    def is_block(self, path):
        try:
            return stat.S_ISBLK(os.stat(path).st_mode)
        except OSError:
            return False

    def realpath(self, path):
        return os.path.realpath(path)


def _walk(nodes):
    for node in nodes:
        yield node
        yield from _walk(node.get("children") or [])


def _mountpoints(node):
    return [m for m in (node.get("mountpoints") or []) if m]


def protected_disks(probe):
    """Whole disks under /, /boot and /boot/efi (through partitions, md, dm)."""
    disks = set()
    for target in PROTECTED_MOUNTS:
        source = probe.findmnt_source(target)
        if not source.startswith("/dev/"):
            continue
        for node in _walk(probe.lsblk(source, inverse=True)):
            if node.get("type") in ("disk", "loop"):
                disks.add(node["name"])
                if node.get("kname"):
                    disks.add(node["kname"])
    return sorted(disks)


def resolve(spec, probe, allow_plain, all_disks):
    """Return (kernel path, shown spec, error)."""
    if isinstance(spec, dict):
        if spec.get("path"):
            spec = spec["path"]
        else:
            for key, field in (("serial", "serial"), ("wwn", "wwn")):
                if spec.get(key):
                    matches = [d["name"] for d in all_disks
                               if d.get("type") == "disk" and (d.get(field) or "").lower() == str(spec[key]).lower()]
                    shown = f"{key}={spec[key]}"
                    if len(matches) != 1:
                        return None, shown, f"{len(matches)} disks match {shown}"
                    return matches[0], shown, None
            return None, json.dumps(spec), "device spec needs one of path, serial, wwn"
    spec = str(spec)
    if not spec.startswith(STABLE_PREFIX) and not allow_plain:
        return None, spec, (f"not a stable identity: use {STABLE_PREFIX}..., serial or wwn "
                            "(kernel names can change between boots)")
    if not probe.is_block(spec):
        return None, spec, "not a block device (missing?)"
    return probe.realpath(spec), spec, None


def mounts_of(probe, names):
    """Mount points (from /proc/mounts) and swap use of any of the names."""
    found = []
    for line in probe.read("/proc/mounts").splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] in names:
            found.append(fields[1].replace("\\040", " "))
    for line in probe.read("/proc/swaps").splitlines()[1:]:
        fields = line.split()
        if fields and fields[0] in names:
            found.append("[swap]")
    return found


def inspect(params, probe):
    protected = protected_disks(probe)
    all_disks = list(_walk(probe.lsblk()))
    multi = len(params["devices"]) > 1
    results, seen = [], set()
    for spec in params["devices"]:
        path, shown, error = resolve(spec, probe, params["allow_plain_paths"], all_disks)
        entry = {"spec": shown, "path": path, "reasons": [], "destroy": [], "verdict": None, "wipe_paths": []}
        results.append(entry)
        if error:
            entry["reasons"].append(error)
            entry["verdict"] = "refused"
            continue
        if path in seen:
            entry["reasons"].append("listed twice")
            entry["verdict"] = "refused"
            continue
        seen.add(path)
        tree = probe.lsblk(path)
        node = tree[0] if tree else {"name": path, "type": "?"}
        names = {n["name"] for n in _walk(tree)} | {n.get("kname") for n in _walk(tree) if n.get("kname")} | {path}
        entry.update(size=node.get("size"), type=node.get("type"))
        info = probe.blkid(path)
        entry.update(fstype=info.get("TYPE", ""), uuid=info.get("UUID", ""), label=info.get("LABEL", ""))
        sigs = probe.wipefs(path)
        entry["signatures"] = [f"{s.get('type')}@{s.get('offset')}" for s in sigs]
        parts = [n["name"] for n in _walk(node.get("children") or []) if n.get("type") == "part"]
        mounted = sorted(set(mounts_of(probe, names) + [m for n in _walk(tree) for m in _mountpoints(n)]))
        holders = probe.holders(node.get("kname") or path)

        if path in protected or node.get("name") in protected:
            entry["reasons"].append("root/boot disk (backs /, /boot or /boot/efi): never used")
        if node.get("type") not in ("disk", "loop"):
            entry["reasons"].append(f"not a whole disk (type {node.get('type')})")

        if multi:
            ours = info.get("TYPE") == "linux_raid_member" and info.get("LABEL", "").split(":")[-1] == params["md_name"]
        else:
            ours = info.get("TYPE") == "xfs" and info.get("LABEL") == params["label"] and not parts
        if mounted and not (ours and mounted == [params["mount_point"]]):
            entry["reasons"].append(f"mounted or in use: {', '.join(mounted)}")
        if holders and not (ours and multi):
            entry["reasons"].append(f"held by {', '.join(holders)} (md/dm/LVM member)")
        if entry["reasons"]:
            entry["verdict"] = "refused"
            continue
        if ours:
            entry["verdict"] = "ours"
            continue
        foreign = []
        if parts:
            foreign.append(f"partitions {', '.join(parts)}")
        if sigs:
            what = info.get("TYPE") or sigs[0].get("type")
            extra = f" UUID={info['UUID']}" if info.get("UUID") else ""
            extra += f" LABEL={info['LABEL']}" if info.get("LABEL") else ""
            foreign.append(f"signatures {', '.join(entry['signatures'])} ({what}{extra})")
        if not foreign:
            entry["verdict"] = "fresh"
        elif params["force"]:
            entry["verdict"] = "wipe"
            entry["destroy"] = foreign
            # Partitions first (their signatures live inside them), then the disk.
            entry["wipe_paths"] = list(reversed(parts)) + [path]
        else:
            entry["verdict"] = "refused"
            entry["reasons"].append("holds data: " + "; ".join(foreign)
                                    + " (set nvme_scratch_force_wipe for this host to destroy it)")
    summary = []
    for e in results:
        why = e["reasons"] or e["destroy"]
        summary.append(f"{e['spec']} ({e['path'] or '?'}): {e['verdict']}" + (f" - {'; '.join(why)}" if why else ""))
    return {
        "devices": results,
        "summary": summary,
        "refused": [{"device": e["spec"], "path": e["path"], "reasons": e["reasons"]}
                    for e in results if e["verdict"] == "refused"],
        "to_wipe": [{"device": e["spec"], "path": e["path"], "destroy": e["destroy"], "wipe_paths": e["wipe_paths"]}
                    for e in results if e["verdict"] == "wipe"],
        "protected_disks": protected,
    }


def main():
    module = AnsibleModule(
        argument_spec={
            "devices": {"type": "list", "elements": "raw", "required": True},
            "allow_plain_paths": {"type": "bool", "default": False},
            "force": {"type": "bool", "default": False},
            "label": {"type": "str", "required": True},
            "md_name": {"type": "str", "required": True},
            "mount_point": {"type": "path", "required": True},
        },
        supports_check_mode=True,
    )
    module.exit_json(changed=False, **inspect(module.params, Probe(module)))


if __name__ == "__main__":
    main()
