"""Safety rules of nvme_scratch's inspection module, with a fake block layer."""
from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest

LIB = pathlib.Path(__file__).resolve().parents[2] / "ansible/roles/nvme_scratch/library/iostack_scratch_inspect.py"
spec = importlib.util.spec_from_file_location("iostack_scratch_inspect", LIB)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)


def disk(name, *, type_="disk", children=(), mounts=(), serial=None, wwn=None):
    return {"name": name, "kname": name, "type": type_, "size": 1 << 40, "mountpoints": list(mounts) or [None],
            "serial": serial, "wwn": wwn, "children": list(children) or None}


class FakeProbe:
    """Block layer of a node: root on nvme0n1p2, scratch candidates nvme1n1..3."""

    def __init__(self):
        self.tree = [
            disk("/dev/nvme0n1", serial="ROOT0", children=[
                disk("/dev/nvme0n1p1", type_="part", mounts=["/boot/efi"]),
                disk("/dev/nvme0n1p2", type_="part", mounts=["/"])]),
            disk("/dev/nvme1n1", serial="S1", wwn="eui.0001"),
            disk("/dev/nvme2n1", serial="S2", children=[disk("/dev/nvme2n1p1", type_="part")]),
            disk("/dev/nvme3n1", serial="S3"),
        ]
        self.links = {"/dev/disk/by-id/nvme-Fake_S1": "/dev/nvme1n1", "/dev/disk/by-id/nvme-Fake_ROOT0": "/dev/nvme0n1",
                      "/dev/disk/by-id/nvme-Fake_S3": "/dev/nvme3n1", "/dev/disk/by-id/nvme-Fake_S2": "/dev/nvme2n1"}
        self.blk = {"/dev/nvme3n1": {"TYPE": "xfs", "UUID": "u-3", "LABEL": "old"}}
        self.sigs = {"/dev/nvme3n1": [{"type": "xfs", "offset": "0x0"}],
                     "/dev/nvme2n1": [{"type": "gpt", "offset": "0x200"}]}
        #: what `findmnt -J -l --nofsroot -o SOURCE,MAJ:MIN,TARGET` lists
        self.mounted = []
        self.holder = {}

    def _find(self, name, nodes=None):
        for node in nodes if nodes is not None else self.tree:
            if node["name"] == name:
                return node
            found = self._find(name, node.get("children") or [])
            if found:
                return found
        return None

    def lsblk(self, dev=None, inverse=False):
        if dev is None:
            return self.tree
        if inverse:  # partition -> its disk
            parent = next(d for d in self.tree if d["name"] == dev or self._find(dev, d.get("children") or []))
            return [{**self._find(dev), "children": [parent] if parent["name"] != dev else None}]
        node = self._find(dev)
        return [node] if node else []

    def blkid(self, dev):
        return self.blk.get(dev, {})

    def wipefs(self, dev):
        return self.sigs.get(dev, [])

    def findmnt_source(self, target):
        return {"/": "/dev/nvme0n1p2", "/boot/efi": "/dev/nvme0n1p1"}.get(target, "")

    def read(self, path):
        return ""

    def holders(self, kname):
        return self.holder.get(kname, [])

    def is_block(self, path):
        return path in self.links or self._find(path) is not None

    def realpath(self, path):
        return self.links.get(path, path)

    def rdev(self, path):
        return None

    def loops(self):
        return []

    def mounts(self):
        return self.mounted

    def trial(self, fstype, label, mkfs_opts, mount_opts, targets):
        return [], []


def params(devices, **kw):
    return {"devices": devices, "allow_plain_paths": False, "force": False, "label": "iostack-scr",
            "md_name": "scratch", "mount_point": "/mnt/localdisk", "fstype": "xfs", "mkfs_opts": "",
            "mount_opts": "defaults", "state_file": "/var/lib/iostack/nvme_scratch.json", **kw}


def verdicts(result):
    return {d["spec"]: (d["verdict"], " ".join(d["reasons"])) for d in result["devices"]}


def test_protected_disks_follow_partitions_to_the_disk():
    assert mod.protected_disks(FakeProbe()) == ["/dev/nvme0n1"]


def test_blank_disk_by_id_is_fresh():
    res = mod.inspect(params(["/dev/disk/by-id/nvme-Fake_S1"]), FakeProbe())
    assert verdicts(res)["/dev/disk/by-id/nvme-Fake_S1"][0] == "fresh"
    assert res["devices"][0]["path"] == "/dev/nvme1n1" and res["refused"] == []


def test_root_disk_refused_even_with_force_and_by_id():
    res = mod.inspect(params(["/dev/disk/by-id/nvme-Fake_ROOT0"], force=True), FakeProbe())
    verdict, why = verdicts(res)["/dev/disk/by-id/nvme-Fake_ROOT0"]
    assert verdict == "refused" and "root/boot disk" in why and "mounted" in why
    assert res["to_wipe"] == []


def test_partition_is_not_a_whole_disk():
    res = mod.inspect(params(["/dev/nvme0n1p2"], allow_plain_paths=True, force=True), FakeProbe())
    assert "not a whole disk" in verdicts(res)["/dev/nvme0n1p2"][1]


def test_plain_kernel_name_needs_opt_in():
    res = mod.inspect(params(["/dev/nvme1n1"]), FakeProbe())
    assert "not a stable identity" in verdicts(res)["/dev/nvme1n1"][1]


def test_data_refused_without_force_wiped_with_force_listing_it():
    probe = FakeProbe()
    refused = mod.inspect(params(["/dev/disk/by-id/nvme-Fake_S3", "/dev/disk/by-id/nvme-Fake_S2"]), probe)
    assert [r["device"] for r in refused["refused"]] == ["/dev/disk/by-id/nvme-Fake_S3", "/dev/disk/by-id/nvme-Fake_S2"]
    assert "xfs UUID=u-3 LABEL=old" in verdicts(refused)["/dev/disk/by-id/nvme-Fake_S3"][1]
    forced = mod.inspect(params(["/dev/disk/by-id/nvme-Fake_S3", "/dev/disk/by-id/nvme-Fake_S2"], force=True), probe)
    assert forced["refused"] == []
    wipe = {w["device"]: w for w in forced["to_wipe"]}
    assert wipe["/dev/disk/by-id/nvme-Fake_S2"]["wipe_paths"] == ["/dev/nvme2n1p1", "/dev/nvme2n1"]
    assert "partitions /dev/nvme2n1p1" in " ".join(wipe["/dev/disk/by-id/nvme-Fake_S2"]["destroy"])
    assert any(line.startswith("/dev/disk/by-id/nvme-Fake_S3 (/dev/nvme3n1): wipe - signatures xfs@0x0")
               for line in forced["summary"])


def test_mounted_elsewhere_refused_even_if_ours_and_forced():
    probe = FakeProbe()
    probe.blk["/dev/nvme1n1"] = {"TYPE": "xfs", "UUID": "u-1", "LABEL": "iostack-scr"}
    # found by its source: the file system's major:minor is not the disk's (btrfs)
    probe.mounted = [{"source": "/dev/nvme1n1", "maj:min": "0:53", "target": "/somewhere"}]
    res = mod.inspect(params(["/dev/disk/by-id/nvme-Fake_S1"], force=True), probe)
    assert "mounted or in use: /somewhere" in verdicts(res)["/dev/disk/by-id/nvme-Fake_S1"][1]


def test_own_filesystem_on_own_mount_is_ours():
    probe = FakeProbe()
    probe.blk["/dev/nvme1n1"] = {"TYPE": "xfs", "UUID": "u-1", "LABEL": "iostack-scr"}
    probe.sigs["/dev/nvme1n1"] = [{"type": "xfs", "offset": "0x0"}]
    probe.mounted = [{"source": "/dev/nvme1n1", "maj:min": "259:1", "target": "/mnt/localdisk"}]
    res = mod.inspect(params(["/dev/disk/by-id/nvme-Fake_S1"]), probe)
    assert verdicts(res)["/dev/disk/by-id/nvme-Fake_S1"][0] == "ours"


def test_md_members_of_our_array_are_ours_other_holders_refused():
    probe = FakeProbe()
    for dev in ("/dev/nvme1n1", "/dev/nvme3n1"):
        probe.blk[dev] = {"TYPE": "linux_raid_member", "LABEL": "node01:scratch"}
        probe.sigs[dev] = [{"type": "linux_raid_member", "offset": "0x1000"}]
        probe.holder[dev] = ["md127"]
    res = mod.inspect(params(["/dev/disk/by-id/nvme-Fake_S1", "/dev/disk/by-id/nvme-Fake_S3"]), probe)
    assert {v for v, _ in verdicts(res).values()} == {"ours"}
    probe.blk["/dev/nvme3n1"]["LABEL"] = "node01:other"
    res = mod.inspect(params(["/dev/disk/by-id/nvme-Fake_S1", "/dev/disk/by-id/nvme-Fake_S3"], force=True), probe)
    assert "held by md127" in verdicts(res)["/dev/disk/by-id/nvme-Fake_S3"][1]


@pytest.mark.parametrize(("spec", "expected"), [
    ({"serial": "S1"}, "/dev/nvme1n1"),
    ({"wwn": "EUI.0001"}, "/dev/nvme1n1"),
])
def test_serial_and_wwn_resolve(spec, expected):
    res = mod.inspect(params([spec]), FakeProbe())
    assert res["devices"][0]["path"] == expected and res["devices"][0]["verdict"] == "fresh"


def test_unknown_serial_and_duplicates_refused():
    res = mod.inspect(params([{"serial": "NOPE"}]), FakeProbe())
    assert "0 disks match serial=NOPE" in verdicts(res)["serial=NOPE"][1]
    res = mod.inspect(params(["/dev/disk/by-id/nvme-Fake_S1", {"serial": "S1"}]), FakeProbe())
    assert "listed twice" in verdicts(res)["serial=S1"][1]


def test_unreadable_device_counts_as_data():
    class Unreadable(FakeProbe):
        def run(self, args):
            return 1, "", "permission denied"
    probe = Unreadable()
    probe.wipefs = mod.Probe.wipefs.__get__(probe)
    res = mod.inspect(params(["/dev/disk/by-id/nvme-Fake_S1"]), probe)
    assert verdicts(res)["/dev/disk/by-id/nvme-Fake_S1"][0] == "refused"


def test_labels_are_checked_per_filesystem_and_options_by_a_trial():
    probe = FakeProbe()
    ok = mod.inspect(params(["/dev/disk/by-id/nvme-Fake_S1"], label="iostack-scr-1"), probe)
    assert ok["invalid"] == ["label 'iostack-scr-1' has 13 bytes: a xfs label holds 1 to 12 "
                             "(nvme_scratch_label)"]
    ext4 = mod.inspect(params(["/dev/disk/by-id/nvme-Fake_S1"], label="iostack-scr-1", fstype="ext4"), probe)
    assert ext4["invalid"] == []
    unparsable = mod.inspect(params(["/dev/disk/by-id/nvme-Fake_S1"], mkfs_opts="-m 'crc=1"), probe)
    assert unparsable["invalid"] == ["mkfs options '-m 'crc=1' do not parse: No closing quotation "
                                     "(nvme_scratch_mkfs_opts)"]
    probe.trial = lambda *args: ([f"tried {args}"], [])
    tried = mod.inspect(params(["/dev/disk/by-id/nvme-Fake_S1"], mkfs_opts="-K", mount_opts="noatime"), probe)
    # tried on the device mkfs would format (a fresh one)
    assert tried["invalid"] == ["tried ('xfs', 'iostack-scr', '-K', 'noatime', ['/dev/nvme1n1'])"]


def test_a_moved_serial_is_refused_and_its_disk_found():
    """The state says /dev/nvme1n1 was formatted on serial S1; it is now serial S3's name."""
    probe = FakeProbe()
    probe.tree[3]["name"] = probe.tree[3]["kname"] = "/dev/nvme1n1"      # S3 now here
    probe.tree[1]["name"] = probe.tree[1]["kname"] = "/dev/nvme3n1"      # S1 moved
    probe.blk = {"/dev/nvme3n1": {"TYPE": "xfs", "UUID": "u-1", "LABEL": "iostack-scr"}}
    probe.sigs = {}
    probe.read = lambda path: (json.dumps({"devices": {"/dev/nvme1n1": {"identity": "wwn eui.0001",
                                                                          "mount": "/mnt/localdisk"}},
                                           "filesystems": {"/mnt/localdisk": "u-1"}})
                               if path.endswith(".json") else "")
    res = mod.inspect(params(["/dev/nvme1n1"], allow_plain_paths=True), probe)
    verdict, why = verdicts(res)["/dev/nvme1n1"]
    assert verdict == "refused"
    assert "names another device than the one this role formatted as /dev/nvme1n1 (wwn eui.0001, " \
           "now /dev/nvme3n1)" in why
    assert res["record"] == {}


def test_a_loop_alias_shares_the_mounts_of_its_twin():
    probe = FakeProbe()
    probe.tree += [disk("/dev/loop0", type_="loop"), disk("/dev/loop1", type_="loop")]
    probe.tree[-2]["maj:min"], probe.tree[-1]["maj:min"] = "7:0", "7:1"
    probe.loops = lambda: [{"name": "/dev/loop0", "maj:min": "7:0", "back-maj:min": "254:0", "back-ino": "42"},
                           {"name": "/dev/loop1", "maj:min": "7:1", "back-maj:min": "254:0", "back-ino": "42"}]
    # found by major:minor alone
    probe.mounts = lambda: [{"source": "/dev/disk/by-label/data", "maj:min": "7:0", "target": "/data"}]
    res = mod.inspect(params(["/dev/loop1"], allow_plain_paths=True, force=True), probe)
    assert "mounted or in use: /data (through /dev/loop0, on the same backing file)" in verdicts(res)["/dev/loop1"][1]


def test_two_names_of_one_device_are_listed_twice():
    probe = FakeProbe()
    probe.rdev = lambda path: "259:1"
    res = mod.inspect(params(["/dev/disk/by-id/nvme-Fake_S1", "/dev/disk/by-id/nvme-Fake_S3"]), probe)
    assert "listed twice (same device as /dev/disk/by-id/nvme-Fake_S1)" in \
        verdicts(res)["/dev/disk/by-id/nvme-Fake_S3"][1]


def test_raid_members_that_disagree_are_all_refused():
    probe = FakeProbe()
    probe.blk["/dev/nvme1n1"] = {"TYPE": "linux_raid_member", "LABEL": "node01:scratch"}
    probe.sigs["/dev/nvme1n1"] = [{"type": "linux_raid_member", "offset": "0x1000"}]
    probe.blk.pop("/dev/nvme3n1")
    probe.sigs.pop("/dev/nvme3n1")
    res = mod.inspect(params(["/dev/disk/by-id/nvme-Fake_S1", "/dev/disk/by-id/nvme-Fake_S3"]), probe)
    assert {v for v, _ in verdicts(res).values()} == {"refused"}
    assert "the RAID0 members disagree" in verdicts(res)["/dev/disk/by-id/nvme-Fake_S3"][1]
