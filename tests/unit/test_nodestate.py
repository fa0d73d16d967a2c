"""iostack_rfm.jobs.nodestate: digests of what a node holds, the judgement of a seven-step
staging run from them, field-by-field comparison, and a node's hardware against its
inventory facts."""
import copy
import json

import pytest

from iostack_rfm.jobs import nodestate

HOSTS = ["node1", "node2", "node3"]


def write(path, data: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def make_case(root, processors=range(6), solved=()):
    write(root / "system" / "controlDict", b"endTime 20;\n")
    write(root / "constant" / "polyMesh" / "points", b"points\n" * 500)
    write(root / ".nvme-stage" / "stage-in.done", b"marker, not data\n")
    for r in processors:
        write(root / f"processor{r}" / "constant" / "polyMesh" / "points", f"rank {r}\n".encode() * 50)
        if r in solved:
            write(root / f"processor{r}" / "20" / "U", f"solved {r}\n".encode())
    return root


def test_tree_splits_a_case_into_processor_dirs_and_the_rest(tmp_path):
    parts = nodestate.tree(make_case(tmp_path / "c", processors=[2, 3]))
    assert sorted(parts) == ["case", "processor2", "processor3"]
    assert parts["case"]["files"] == 2                 # the marker is not data
    assert parts["case"]["bytes"] == len(b"endTime 20;\n") + 7 * 500
    assert nodestate.tree(tmp_path / "missing") == {}


def test_one_flipped_bit_changes_the_digest(tmp_path):
    case = make_case(tmp_path / "c", processors=[0])
    before = nodestate.tree(case)
    points = case / "processor0" / "constant" / "polyMesh" / "points"
    data = bytearray(points.read_bytes())
    data[17] ^= 0x01
    points.write_bytes(bytes(data))
    after = nodestate.tree(case)
    assert after["processor0"]["bytes"] == before["processor0"]["bytes"]
    assert after["processor0"]["sha256"] != before["processor0"]["sha256"]
    assert after["case"] == before["case"]


def as_output(records):
    """A job's output holding these records, as the job prints them."""
    return "\n".join(["iostack-step: name=x rc=0 start=0 end=1"]
                     + [f"{nodestate.PREFIX} {json.dumps(r)}" for r in records])


def records_of_a_good_run(tmp_path):
    """The records the job prints, built from real directories: 3 nodes x 2 ranks."""
    shared = make_case(tmp_path / "shared", processors=[])
    head = make_case(tmp_path / "head", processors=[])
    recs = [("shared", "node1", shared), ("stage-in", "node1", head)]
    out = [{"kind": "layout", "label": "layout", "host": "node1", "hosts": HOSTS}]
    out += [{"kind": "tree", "label": lab, "host": h, "parts": nodestate.tree(d)} for lab, h, d in recs]
    decomposed = nodestate.tree(make_case(tmp_path / "dec", processors=range(6)))
    out.append({"kind": "tree", "label": "decompose", "host": "node1", "parts": decomposed})
    owned = nodestate.owned_processors(HOSTS, 2)
    solved = {}
    for h in HOSTS:
        mine = sorted(int(p[9:]) for p in owned[h])
        held = range(6) if h == "node1" else mine
        fanned = nodestate.tree(make_case(tmp_path / f"fan-{h}", processors=held))
        solved[h] = nodestate.tree(make_case(tmp_path / f"solve-{h}", processors=held, solved=mine))
        out += [{"kind": "tree", "label": "fan-out", "host": h, "parts": fanned},
                {"kind": "tree", "label": "solve", "host": h, "parts": solved[h]}]
    collected = nodestate.tree(make_case(tmp_path / "collect", processors=range(6), solved=range(6)))
    out.append({"kind": "tree", "label": "collect", "host": "node1", "parts": collected})
    final = make_case(tmp_path / "final", processors=range(6), solved=range(6))
    write(final / "20" / "U", b"reconstructed\n")
    out.append({"kind": "tree", "label": "reconstruct", "host": "node1",
                "parts": nodestate.tree(final)})
    staged = make_case(tmp_path / "staged", processors=[])
    write(staged / "20" / "U", b"reconstructed\n")
    out.append({"kind": "tree", "label": "stage-out", "host": "node1",
                "parts": nodestate.tree(staged)})
    return out


def test_a_run_that_moved_exactly_the_right_bytes_passes(tmp_path):
    assert nodestate.staging_problems(as_output(records_of_a_good_run(tmp_path)), 2) == []


def edit(records, label, host, change):
    out = copy.deepcopy(records)
    for r in out:
        if r["label"] == label and r["host"] == host:
            change(r["parts"])
    return out


@pytest.mark.parametrize(("label", "host", "change", "expected"), [
    # a node got another node's processor dir: it holds more than its own
    ("fan-out", "node2", lambda p: p.update(processor4={"files": 1, "bytes": 1, "sha256": "x"}),
     "fan-out: node2: processor4"),
    ("solve", "node3", lambda p: p.update(processor0={"files": 1, "bytes": 1, "sha256": "x"}),
     "solve: node3 holds ['processor0', 'processor4', 'processor5'], expected only"),
    # a byte changed on the way
    ("stage-in", "node1", lambda p: p["case"].update(sha256="0" * 64), "stage-in: node1's copy"),
    ("collect", "node1", lambda p: p["processor3"].update(sha256="0" * 64),
     "collect: node1's copies of node2's dirs: processor3"),
    ("stage-out", "node1", lambda p: p.update(processor0={"files": 1, "bytes": 1, "sha256": "x"}),
     "stage-out: the shared case: processor0"),
])
def test_each_kind_of_wrong_transfer_is_named(tmp_path, label, host, change, expected):
    good = records_of_a_good_run(tmp_path)
    problems = nodestate.staging_problems(as_output(edit(good, label, host, change)), 2)
    assert any(expected in p for p in problems), problems


def test_a_dir_the_solver_left_as_it_was_fanned_out_is_named(tmp_path):
    good = records_of_a_good_run(tmp_path)
    fanned = next(r for r in good if r["label"] == "fan-out" and r["host"] == "node2")
    stale = edit(good, "solve", "node2",
                 lambda p: p.update(processor2=fanned["parts"]["processor2"]))
    assert "solve: processor2 on node2 was not rewritten by the solver" in \
        nodestate.staging_problems(as_output(stale), 2)


def test_a_missing_record_is_a_problem(tmp_path):
    records = [r for r in records_of_a_good_run(tmp_path)
               if not (r["label"] == "fan-out" and r["host"] == "node3")]
    assert "fan-out: no record from node3" in nodestate.staging_problems(as_output(records), 2)
    assert nodestate.staging_problems(as_output(records[1:]), 2) == ["no layout record"]


def fields_record(label, time="20", **fields):
    return {"kind": "fields", "label": label, "host": "node1", "time": time, "fields": fields}


def test_fields_compare_file_by_file():
    same = [fields_record("nvme", U="a", p="b"), fields_record("shared", U="a", p="b")]
    assert nodestate.field_problems(as_output(same), "nvme", "shared") == []
    one_off = [fields_record("nvme", U="a", p="c"), fields_record("shared", U="a", p="b")]
    assert nodestate.field_problems(as_output(one_off), "nvme", "shared") == ["p: nvme c against shared b"]
    later = [fields_record("nvme", "30", U="a"), fields_record("shared", U="a")]
    assert nodestate.field_problems(as_output(later), "nvme", "shared") == [
        "latest time 30 (nvme) against 20 (shared)"]
    assert nodestate.field_problems(as_output(same[:1]), "nvme", "shared") == ["no fields record of shared"]


def test_fields_of_the_latest_time(tmp_path):
    case = tmp_path / "c"
    for t in ("0", "10", "20", "5"):
        write(case / t / "U", f"U at {t}\n".encode())
    write(case / "20" / "uniform" / "time", b"value 20;\n")
    found = nodestate.fields(case)
    assert found["time"] == "20" and sorted(found["fields"]) == ["U", "uniform/time"]


FACTS = {"bios_nps": 1, "bios_smt": False, "hugepages_2m_count": 0,
         "nvme_scratch_mount": "/mnt/localdisk", "nvme_scratch_label": "iostack-scr",
         "nvme_scratch_mount_opts": "defaults,noatime,nofail,x-systemd.device-timeout=30s"}
FOUND = {"numa_nodes": 1, "sockets": 1, "smt_control": "notsupported", "smt_active": "0",
         "hugepages_total": 0,
         "scratch": {"mounted": True, "source": "/dev/loop3", "fstype": "xfs",
                     "options": "rw,noatime,inode64,logbufs=8,logbsize=32k,noquota",
                     "uuid": "1234", "label": "iostack-scr", "devices": ["/dev/loop3"],
                     "fstab": {"spec": "UUID=1234", "fstype": "xfs",
                               "options": "defaults,noatime,nofail,x-systemd.device-timeout=30s"}}}


def found_with(**changes):
    out = copy.deepcopy(FOUND)
    for key, value in changes.items():
        if key in out["scratch"]:
            out["scratch"][key] = value
        else:
            out[key] = value
    return out


def test_a_node_as_the_inventory_says_has_no_mismatch():
    assert nodestate.mismatches("node2", FACTS, FOUND) == []


def test_the_hardware_record_is_judged_against_its_own_nodes_facts():
    record = {"kind": "hardware", "label": "hardware", "host": "node2",
              "found": found_with(options="rw,relatime")}
    facts = json.dumps({"node1": {}, "node2": FACTS})
    problems = nodestate.hardware_problems(as_output([record]), facts)
    assert problems and all(p.startswith("node2: ") for p in problems)
    assert nodestate.hardware_problems(as_output([]), facts) == ["0 hardware records, expected 1"]


@pytest.mark.parametrize(("changes", "expected"), [
    ({"options": "rw,relatime,inode64"}, "node2: /mnt/localdisk is mounted without noatime"),
    ({"smt_active": "1", "smt_control": "on"}, "node2: SMT: inventory says off, node has on"),
    ({"numa_nodes": 2}, "node2: NUMA nodes (sockets x NPS): inventory says 1, node has 2"),
    ({"hugepages_total": 64}, "node2: 2 MB huge pages: inventory says 0, node has 64"),
    ({"source": "/dev/loop1"}, "node2: /mnt/localdisk device: inventory says /dev/loop3, node has /dev/loop1"),
    ({"uuid": "9999"}, "node2: /mnt/localdisk fstab entry: inventory says UUID=9999, node has UUID=1234"),
    ({"fstype": "ext4"}, "node2: /mnt/localdisk file system: inventory says xfs, node has ext4"),
    ({"label": "other"}, "node2: /mnt/localdisk label: inventory says iostack-scr, node has other"),
    ({"mounted": False}, "node2: nothing is mounted at /mnt/localdisk"),
])
def test_each_drift_is_named_with_its_node(changes, expected):
    problems = nodestate.mismatches("node2", FACTS, found_with(**changes))
    assert any(p.startswith(expected) for p in problems), problems


def test_a_file_system_oracles_tips_made_and_the_role_adopted_is_as_the_inventory_says():
    """[OCI-Tips-NVMe]: XFS labelled localscratch on the disk's one partition, mounted by
    `LABEL=localscratch /mnt/localdisk/ xfs defaults,noatime`; a partition of another disk,
    or an entry by another label, is still named."""
    facts = {**FACTS, "nvme_scratch_label": "localscratch",
             "nvme_scratch_mount_opts": "defaults,noatime"}
    oracle = found_with(source="/dev/nvme0n1p1", devices=["/dev/nvme0n1"], label="localscratch",
                        fstab={"spec": "LABEL=localscratch", "fstype": "xfs",
                               "options": "defaults,noatime"})
    assert nodestate.mismatches("hpc-node-1", facts, oracle) == []
    other_disk = copy.deepcopy(oracle)
    other_disk["scratch"]["source"] = "/dev/nvme1n1p1"
    assert any("device: inventory says /dev/nvme0n1, node has /dev/nvme1n1p1" in p
               for p in nodestate.mismatches("hpc-node-1", facts, other_disk))
    other_label = copy.deepcopy(oracle)
    other_label["scratch"]["fstab"]["spec"] = "LABEL=precious"
    assert any("fstab entry: inventory says UUID=1234, node has LABEL=precious" in p
               for p in nodestate.mismatches("hpc-node-1", facts, other_label))


def test_an_fstab_entry_names_its_mount_point_with_or_without_a_slash(tmp_path):
    fstab = tmp_path / "fstab"
    fstab.write_text("LABEL=localscratch /mnt/localdisk/ xfs defaults,noatime 0 0\n")
    assert nodestate.fstab_entry(fstab, "/mnt/localdisk") == {
        "spec": "LABEL=localscratch", "fstype": "xfs", "options": "defaults,noatime"}


def test_unstated_facts_are_not_compared():
    assert nodestate.mismatches("n", {}, found_with(numa_nodes=8, smt_active="1")) == []


def test_kernel_options_of_an_fstab_entry():
    assert nodestate.kernel_options("defaults,noatime,nofail,x-systemd.device-timeout=30s") == \
        {"rw", "noatime"}
    assert nodestate.kernel_options("ro,nosuid,_netdev,noauto") == {"ro", "nosuid"}


def test_an_rdma_link_that_is_not_active_is_named(tmp_path):
    """OCI's MPI goes over mlx5_2 port 1 [OCI-Tips-Slurm]: the kernel's port state is read
    where the inventory's rdma facts point, and anything but ACTIVE is a drift."""
    port = tmp_path / "class/infiniband/mlx5_2/ports/1"
    port.mkdir(parents=True)
    (port / "state").write_text("4: ACTIVE\n")
    (port / "phys_state").write_text("5: LinkUp\n")
    facts = {"rdma_device": "mlx5_2", "rdma_port": 1, "rdma_sysfs_root": str(tmp_path),
             "bios_sysfs_root": str(tmp_path)}
    found = nodestate.hardware(facts)
    assert found["rdma"] == {"state": "4: ACTIVE", "phys_state": "5: LinkUp"}
    assert nodestate.mismatches("hpc-node-1", facts, found) == []
    (port / "state").write_text("1: DOWN\n")
    (port / "phys_state").write_text("3: Disabled\n")
    assert nodestate.mismatches("hpc-node-1", facts, nodestate.hardware(facts)) == [
        "hpc-node-1: RDMA link mlx5_2 port 1 is DOWN (physical state 3: Disabled), inventory "
        "says it carries MPI"]
    facts["rdma_device"] = "mlx5_9"
    assert nodestate.mismatches("hpc-node-1", facts, nodestate.hardware(facts)) == [
        "hpc-node-1: RDMA link mlx5_9 port 1 is absent (physical state absent), inventory "
        "says it carries MPI"]


def test_the_system_tools_are_found_without_sbin_on_path(monkeypatch):
    """A job of a user (the nightly's service account) has no /usr/sbin on PATH, where
    Debian keeps blkid: the hardware check still finds it."""
    import shutil

    from iostack_rfm.jobs import nodestate

    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    found = nodestate._tool("blkid")
    assert found == shutil.which("blkid", path=nodestate.SYSTEM_TOOLS) or found == "blkid"
    assert found.startswith("/") or shutil.which("blkid", path=nodestate.SYSTEM_TOOLS) is None
