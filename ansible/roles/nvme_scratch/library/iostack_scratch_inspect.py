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
    C(lsblk -J) (its mount points include [SWAP]), C(blkid -p), C(wipefs -n -J),
    C(findmnt -J), C(losetup -J) and sysfs holders. Changes nothing on any
    device.
  - C(invalid) lists mkfs and mount arguments that would fail: the label's
    length for the filesystem, the md name, and what mkfs and mount say of
    the options when tried on a throwaway image file (mkfs on a sparse file,
    a loop mount of it), so a bad argument stops the run before any wipe.
    In check mode nothing is written anywhere, not even a throwaway image:
    mkfs's own no-write mode (C(mkfs.xfs -N), C(mke2fs -n)) reads the devices
    it would format, and the mount options wait for a real run (only the
    kernel can judge them, by mounting).
  - Aliases count: a second loop device on the same backing file, or a
    second node with the same major:minor, is mounted or in use when its
    alias is.
  - Every device the role formatted is recorded in I(state_file) by stable
    identity (WWN, serial, or a loop device's backing file) and the
    filesystem UUID; a listed name that now resolves to another device is
    refused (device names moved) instead of formatted.
  - A device whose file system (on the disk or its one partition) has the
    label and type of an I(adopt) entry, and is mounted at I(mount_point), is
    C(adopt): the file system another tool made for this purpose (Oracle's
    `localscratch`), used as it is, never formatted or wiped, even with
    I(force); mounted anywhere else, or not at all, it is refused.
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
  fstype:
    description: Filesystem the role makes.
    type: str
    choices: [xfs, ext4]
    default: xfs
  mkfs_opts:
    description: Extra mkfs options (tried on a throwaway image).
    type: str
    default: ""
  mount_opts:
    description: Mount options (tried on a throwaway image).
    type: str
    default: defaults
  state_file:
    description: JSON record of the devices the role formatted, by stable identity.
    type: path
    required: true
  adopt:
    description: File systems made by another tool to use as they are, by label and type (dicts with label and fstype).
    type: list
    elements: dict
    default: []
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
adopted: {description: File systems used as they are (adopt), with path, uuid and label., type: list, returned: always}
protected_disks: {description: Disks that back /, /boot or /boot/efi., type: list, returned: always}
invalid: {description: mkfs/mount arguments that would fail, one line each., type: list, returned: always}
checked: {description: How the mkfs and mount arguments were checked, one line each., type: list, returned: always}
state: {description: The recorded state (devices by spec, filesystems by mount point)., type: dict, returned: always}
record: {description: State entries for the listed devices, to record once formatted., type: dict, returned: always}
"""

import json
import os
import re
import shlex
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule

STABLE_PREFIX = "/dev/disk/by-id/"
PROTECTED_MOUNTS = ("/", "/boot", "/boot/efi")
# Longest label each filesystem keeps (mkfs.xfs refuses a longer one; mke2fs truncates it).
LABEL_MAX = {"xfs": 12, "ext4": 16}
# Size of the throwaway image the mkfs/mount arguments are tried on (mkfs.xfs needs 300 MB).
TRIAL_BYTES = {"xfs": 320 << 20, "ext4": 32 << 20}
# mkfs's own no-write modes: parse the options, read the device, print what they would make
MKFS_NO_WRITE = {"xfs": ["mkfs.xfs", "-N", "-f"], "ext4": ["mke2fs", "-t", "ext4", "-n", "-F", "-q"]}
MD_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")


class Probe:
    """Runs the read-only commands; swapped out in unit tests."""

    def __init__(self, module):
        self.module = module

    def run(self, args):
        rc, out, err = self.module.run_command(args)
        return rc, out, err

    def lsblk(self, dev=None, inverse=False):
        args = ["lsblk", "-J", "-b", "-p", "-o",
                "NAME,KNAME,PKNAME,MAJ:MIN,TYPE,SIZE,FSTYPE,UUID,LABEL,MOUNTPOINTS,SERIAL,WWN"]
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

    def rdev(self, path):
        try:
            st = os.stat(path)
        except OSError:
            return None
        return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}" if stat.S_ISBLK(st.st_mode) else None

    def loops(self):
        """Attached loop devices with their backing file's device and inode."""
        rc, out, _ = self.run(["losetup", "-J", "-l", "-O", "NAME,MAJ:MIN,BACK-MAJ:MIN,BACK-INO"])
        if rc != 0 or not out.strip():
            return []
        return [{k: str(v).strip() for k, v in d.items()} for d in json.loads(out).get("loopdevices", [])]

    def mounts(self):
        """Every mount as findmnt lists it: source (without a bind mount's [/dir]),
        major:minor and mount point."""
        rc, out, _ = self.run(["findmnt", "-J", "-l", "--nofsroot", "-o", "SOURCE,MAJ:MIN,TARGET"])
        return json.loads(out).get("filesystems", []) if rc == 0 and out.strip() else []

    def trial(self, fstype, label, mkfs_opts, mount_opts, targets):
        """What mkfs and mount refuse of the role's arguments, before any device is written;
        returns (problems, how they were checked). mkfs's own no-write mode reads each device
        it would format (`targets`: its size counts too). A real run then makes a throwaway
        image, mkfs and mounts it for the mount options, which only the kernel can judge; in
        check mode nothing is written, so they wait for the real run."""
        options = ["-L", label, *shlex.split(mkfs_opts)]
        checked, problems = [], []
        if not targets:
            checked.append(f"mkfs.{fstype} options '{' '.join(options)}': no device to read "
                           "(none to format, or the md array is not made yet)")
        for target in targets:
            argv = [*MKFS_NO_WRITE[fstype], *options, target]
            rc, _, err = self.run(argv)
            checked.append(f"{' '.join(argv)}: {'refused' if rc else 'accepted'} (writes nothing)")
            if rc != 0:
                return [f"mkfs.{fstype} refuses the options '{' '.join(options)}' for {target}: "
                        f"{_first_line(err)}"], checked
        if self.module.check_mode:
            checked.append(f"mount options '{mount_opts}': not tried in check mode (a real run "
                           "mounts a throwaway image with them before writing any device)")
            return problems, checked
        checked.append(f"mkfs.{fstype} {' '.join(options)} and mount -o {mount_opts} tried on a "
                       "throwaway image")
        with tempfile.TemporaryDirectory(prefix="nvme-scratch-trial-") as tmp:
            image, mnt = os.path.join(tmp, "trial.img"), os.path.join(tmp, "mnt")
            with open(image, "wb") as fh:
                fh.truncate(TRIAL_BYTES[fstype])
            quiet = ["-q", "-F"] if fstype == "ext4" else ["-q"]
            rc, _, err = self.run([f"mkfs.{fstype}", *quiet, *options, image])
            if rc != 0:
                return [f"mkfs.{fstype} refuses the options '{' '.join(options)}': {_first_line(err)}"], checked
            if not os.path.exists("/dev/loop-control"):
                return [], checked
            os.mkdir(mnt)
            rc, _, err = self.run(["mount", "-t", fstype, "-o", f"loop,{mount_opts}", image, mnt])
            if rc != 0:
                return [f"mount refuses the options '{mount_opts}' for {fstype}: {_first_line(err)}"], checked
            self.run(["umount", mnt])
        return [], checked


def _first_line(text):
    return next((line.strip() for line in text.splitlines() if line.strip()), "no message")


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


def mounts_of(probe, names, majmins=()):
    """Mount points of any of the device names or major:minor numbers (a file system whose
    major:minor is not its device's, as btrfs's, is found by its source). Swap is in
    lsblk's mount points."""
    return [fs["target"] for fs in probe.mounts()
            if fs.get("source") in names or fs.get("maj:min") in majmins]


def validate_arguments(params, probe, targets):
    """The mkfs and mount arguments, checked before any device is written: (one line per
    problem, how they were checked). `targets` are the devices mkfs would format."""
    problems = []
    fstype, label = params["fstype"], params["label"]
    if not label or len(label.encode()) > LABEL_MAX[fstype]:
        problems.append(f"label '{label}' has {len(label.encode())} bytes: a {fstype} label "
                        f"holds 1 to {LABEL_MAX[fstype]} (nvme_scratch_label)")
    if len(params["devices"]) > 1 and not MD_NAME.match(params["md_name"]):
        problems.append(f"md name '{params['md_name']}' must be 1 to 32 of A-Z a-z 0-9 _ . - "
                        "(nvme_scratch_md_name)")
    try:
        shlex.split(params["mkfs_opts"])
    except ValueError as e:
        problems.append(f"mkfs options '{params['mkfs_opts']}' do not parse: {e} (nvme_scratch_mkfs_opts)")
    if problems:
        return problems, []
    return probe.trial(fstype, label, params["mkfs_opts"], params["mount_opts"], targets)


def identity(node, loop):
    """What names a disk whatever the kernel calls it: WWN, serial, or a loop device's
    backing file; "" when it has none of them."""
    if node.get("wwn"):
        return f"wwn {node['wwn']}"
    if node.get("serial"):
        return f"serial {node['serial']}"
    if loop:
        return f"loop backing file {loop['back-maj:min']}/{loop['back-ino']}"
    return ""


def read_state(probe, path):
    try:
        state = json.loads(probe.read(path) or "{}")
    except ValueError:
        state = {}
    return {"devices": dict(state.get("devices") or {}), "filesystems": dict(state.get("filesystems") or {})}


def moved(spec, current_identity, uuid, multi, state, state_file, all_disks, loops):
    """Why the device a listed spec names now is not the one this role formatted as it
    (device names moved, a disk replaced), or None."""
    rec = state["devices"].get(spec)
    if not rec:
        return None
    fs_uuid = state["filesystems"].get(rec.get("mount", ""), "")
    if rec.get("identity") and current_identity:
        if rec["identity"] == current_identity:
            return None
        was = rec["identity"]
    elif not multi and fs_uuid and uuid != fs_uuid:
        was = f"filesystem UUID {fs_uuid}"
    else:
        return None
    now = [d["name"] for d in all_disks
           if (rec.get("identity") and identity(d, loops.get(d.get("maj:min"))) == rec["identity"])
           or (fs_uuid and d.get("uuid") == fs_uuid)]
    return (f"names another device than the one this role formatted as {spec} ({was}, "
            f"now {' '.join(now) or 'not found'}): device names moved or the disk was replaced; "
            f"list devices by {STABLE_PREFIX}..., or, if it was replaced on purpose, remove "
            f"{spec} from {state_file}")


def inspect(params, probe):
    protected = protected_disks(probe)
    all_disks = list(_walk(probe.lsblk()))
    loops = {lo.get("maj:min"): lo for lo in probe.loops()}
    state = read_state(probe, params["state_file"])
    multi = len(params["devices"]) > 1
    results, seen = [], {}
    for spec in params["devices"]:
        path, shown, error = resolve(spec, probe, params["allow_plain_paths"], all_disks)
        entry = {"spec": shown, "path": path, "reasons": [], "destroy": [], "verdict": None,
                 "wipe_paths": [], "identity": ""}
        results.append(entry)
        if error:
            entry["reasons"].append(error)
            entry["verdict"] = "refused"
            continue
        key = probe.rdev(path) or path
        if key in seen:
            entry["reasons"].append(f"listed twice (same device as {seen[key]})")
            entry["verdict"] = "refused"
            continue
        seen[key] = shown
        tree = probe.lsblk(path)
        node = tree[0] if tree else {"name": path, "type": "?"}
        # the device and every alias of it: loop devices on the same backing file
        loop = loops.get(node.get("maj:min"))
        aliases = [lo["name"] for lo in loops.values() if loop and lo is not loop
                   and (lo.get("back-maj:min"), lo.get("back-ino")) == (loop.get("back-maj:min"), loop.get("back-ino"))]
        for alias in aliases:
            tree = tree + probe.lsblk(alias)
        names = {n["name"] for n in _walk(tree)} | {n.get("kname") for n in _walk(tree) if n.get("kname")} | {path}
        majmins = {n["maj:min"] for n in _walk(tree) if n.get("maj:min")} | ({key} if ":" in key else set())
        entry.update(size=node.get("size"), type=node.get("type"), identity=identity(node, loop))
        info = probe.blkid(path)
        entry.update(fstype=info.get("TYPE", ""), uuid=info.get("UUID", ""), label=info.get("LABEL", ""))
        sigs = probe.wipefs(path)
        entry["signatures"] = [f"{s.get('type')}@{s.get('offset')}" for s in sigs]
        parts = [n["name"] for n in _walk(node.get("children") or []) if n.get("type") == "part"]
        mounted = sorted(set(mounts_of(probe, names, majmins) + [m for n in _walk(tree) for m in _mountpoints(n)]))
        holders = sorted({h for n in [node] + [{"kname": a} for a in aliases] for h in probe.holders(n.get("kname") or path)})

        # a file system another tool made for this (on the disk or its one partition)
        # (blkid's low-level probe: lsblk's labels come from udev, which a node may not run)
        adoptable = None
        if not multi and params.get("adopt"):
            candidates = [n for n in _walk(node.get("children") or []) if n.get("type") == "part"] or [node]
            if len(candidates) == 1:
                found = probe.blkid(candidates[0]["name"])
                if any(found.get("LABEL") == a.get("label") and found.get("TYPE") == a.get("fstype", params["fstype"])
                       for a in params["adopt"]):
                    adoptable = {**candidates[0], "label": found.get("LABEL"), "fstype": found.get("TYPE"),
                                 "uuid": found.get("UUID")}
        if path in protected or node.get("name") in protected:
            entry["reasons"].append("root/boot disk (backs /, /boot or /boot/efi): never used")
        if node.get("type") not in ("disk", "loop"):
            entry["reasons"].append(f"not a whole disk (type {node.get('type')})")
        why_moved = moved(shown, entry["identity"], entry["uuid"], multi, state, params["state_file"],
                          all_disks, loops)
        if why_moved:
            entry["reasons"].append(why_moved)

        if multi:
            ours = info.get("TYPE") == "linux_raid_member" and info.get("LABEL", "").split(":")[-1] == params["md_name"]
        else:
            ours = info.get("TYPE") == params["fstype"] and info.get("LABEL") == params["label"] and not parts
        if adoptable is not None and not entry["reasons"] and not aliases:
            where = _mountpoints(adoptable)
            label = f"{adoptable.get('fstype')} labelled {adoptable.get('label')} on {adoptable['name']}"
            if mounted == [params["mount_point"]] and where == [params["mount_point"]]:
                entry.update(verdict="adopt", fs_path=adoptable["name"], uuid=adoptable.get("uuid") or "",
                             label=adoptable.get("label"), fstype=adoptable.get("fstype"))
                continue
            entry["reasons"].append(
                f"holds {label}, a file system nvme_scratch_adopt names, but it is "
                + (f"mounted at {', '.join(mounted)}" if mounted else "not mounted")
                + f", not at {params['mount_point']}: the role adopts it only where it serves as "
                  "the scratch (mount it there by its own fstab entry)")
            entry["verdict"] = "refused"
            continue
        if mounted and not (ours and mounted == [params["mount_point"]] and not aliases):
            through = f" (through {', '.join(aliases)}, on the same backing file)" if aliases else ""
            entry["reasons"].append(f"mounted or in use: {', '.join(mounted)}{through}")
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
    verdicts = {e["verdict"] for e in results}
    if multi and "ours" in verdicts and verdicts - {"ours", "refused"}:
        for e in results:
            if e["verdict"] != "refused":
                e["verdict"] = "refused"
                e["reasons"].append(f"the RAID0 members disagree: some are members of md "
                                    f"{params['md_name']}, others are not (a replaced member?); "
                                    "a RAID0 array cannot be repaired, only wiped and created anew")
    # what mkfs would format: a fresh or to-be-wiped device (an md array exists only once
    # the run has made it: then none)
    targets = [] if multi else [e["path"] for e in results if e["verdict"] in ("fresh", "wipe")]
    invalid, checked = validate_arguments(params, probe, targets)
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
        "invalid": invalid,
        "checked": checked,
        "state": state,
        "record": {e["spec"]: {"identity": e["identity"], "mount": params["mount_point"],
                               **({"adopted": e["fs_path"]} if e["verdict"] == "adopt" else {})}
                   for e in results if e["verdict"] != "refused"},
        "adopted": [{"device": e["spec"], "path": e["fs_path"], "uuid": e["uuid"], "label": e["label"]}
                    for e in results if e["verdict"] == "adopt"],
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
            "fstype": {"type": "str", "choices": sorted(LABEL_MAX), "default": "xfs"},
            "mkfs_opts": {"type": "str", "default": ""},
            "mount_opts": {"type": "str", "default": "defaults"},
            "state_file": {"type": "path", "required": True},
            "adopt": {"type": "list", "elements": "dict", "default": []},
        },
        supports_check_mode=True,
    )
    module.exit_json(changed=False, **inspect(module.params, Probe(module)))


if __name__ == "__main__":
    main()
