"""What one node holds, printed by a job step on that node and judged by the check: the
job side of the multi-node checks (checks/openfoam_cluster.py, checks/node_hardware.py).

    python3 -m iostack_rfm.jobs.nodestate tree CASE --label L     # bytes and sha256 by part
    python3 -m iostack_rfm.jobs.nodestate fields CASE --label L   # sha256 of each field file
    python3 -m iostack_rfm.jobs.nodestate hardware FACTS.json     # NUMA, SMT, huge pages, scratch
    python3 -m iostack_rfm.jobs.nodestate layout                  # the job's nodes in rank order

Each prints one line, `nodestate: {json}`, naming the node it ran on (`host`), so a step
run on every node (`srun --ntasks-per-node=1`) leaves one line per node in the job's
output. `tree` splits an OpenFOAM case into its parts: every `processorN` directory and
`case` (everything else but nvme-stage's markers), each with its file count, bytes and a
digest over relative paths and contents: two parts hold the same bytes exactly when their
digests are equal. `fields` digests each file of the latest time directory.

`hardware` reads, where the node's Ansible facts (FACTS.json: ansible-inventory's
hostvars by host) say they are: the NUMA nodes and sockets under bios_sysfs_root, SMT's
control/active, HugePages_Total in hugepages_meminfo, the state of the RDMA port
rdma_device/rdma_port (class/infiniband under rdma_sysfs_root), and the scratch mount at
nvme_scratch_mount (source device, file system, options, label, UUID, and the UUID and
options its fstab entry names). `mismatches` compares that with the facts, per node.

The judging functions (staging_problems, field_problems, hardware_problems) read the
job's output text, as the checks' `parsed()` gives it. Standard library only.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys

PREFIX = "nodestate:"
MARKERS = (".nvme-stage", ".nvme-stage-partial")
_PROCESSOR = re.compile(r"processor\d+")
# mount(8) options that never reach the kernel's mount table
_USERSPACE_OPTIONS = {"defaults", "auto", "noauto", "nofail", "user", "nouser", "users",
                      "owner", "group", "_netdev", "comment"}
_DEFAULT_KERNEL_OPTIONS = {"defaults": ["rw"]}


def host() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def _digest(top: pathlib.Path, files: list[pathlib.Path]) -> dict:
    h = hashlib.sha256()
    size = 0
    for f in sorted(files):
        data = f.read_bytes()
        h.update(str(f.relative_to(top)).encode() + b"\0" + hashlib.sha256(data).digest())
        size += len(data)
    return {"files": len(files), "bytes": size, "sha256": h.hexdigest() if files else "none"}


def tree(case) -> dict:
    """{part: {files, bytes, sha256}} of a case directory; {} where there is none."""
    case = pathlib.Path(case)
    parts: dict[str, list[pathlib.Path]] = {}
    if not case.is_dir():
        return {}
    for path in case.rglob("*"):
        rel = path.relative_to(case)
        if rel.parts[0] in MARKERS or not path.is_file() or path.is_symlink():
            continue
        part = rel.parts[0] if _PROCESSOR.fullmatch(rel.parts[0]) and len(rel.parts) > 1 else "case"
        parts.setdefault(part, []).append(path)
    return {part: _digest(case, files) for part, files in sorted(parts.items())}


def latest_time(case: pathlib.Path) -> pathlib.Path | None:
    times = []
    for p in case.iterdir():
        try:
            value = float(p.name)
        except ValueError:
            continue
        if p.is_dir() and value != 0:
            times.append((value, p))
    return max(times)[1] if times else None


def fields(case) -> dict:
    """{time, fields: {name: sha256}} of the latest written time of a (reconstructed) case."""
    latest = latest_time(pathlib.Path(case))
    if latest is None:
        return {"time": "none", "fields": {}}
    return {"time": latest.name,
            "fields": {str(f.relative_to(latest)): hashlib.sha256(f.read_bytes()).hexdigest()
                       for f in sorted(latest.rglob("*")) if f.is_file()}}


# hardware ----------------------------------------------------------------------------
def _read(path) -> str | None:
    try:
        return pathlib.Path(path).read_text().strip()
    except OSError:
        return None


def numa_layout(sysfs: pathlib.Path) -> dict:
    nodes = [p for p in (sysfs / "devices/system/node").glob("node[0-9]*") if p.is_dir()]
    packages = {_read(p / "topology/physical_package_id")
                for p in (sysfs / "devices/system/cpu").glob("cpu[0-9]*")} - {None}
    return {"numa_nodes": len(nodes), "sockets": len(packages),
            "smt_control": _read(sysfs / "devices/system/cpu/smt/control"),
            "smt_active": _read(sysfs / "devices/system/cpu/smt/active")}


#: where Debian keeps the admin's tools (blkid), which a user's PATH lacks (/usr/sbin, /sbin)
SYSTEM_TOOLS = "/usr/sbin:/sbin"


def _tool(name: str) -> str:
    """A system tool by its path: on PATH, else where the system keeps it (a job of a user
    whose PATH has no sbin still finds blkid)."""
    return shutil.which(name, path=f"{os.environ.get('PATH', '')}:{SYSTEM_TOOLS}") or name


def _findmnt(mount: str) -> dict:
    p = subprocess.run([_tool("findmnt"), "-J", "-n", "--mountpoint", mount, "-o",
                        "SOURCE,FSTYPE,OPTIONS"], capture_output=True, text=True)
    found = json.loads(p.stdout).get("filesystems", []) if p.returncode == 0 else []
    return found[0] if found else {}


def _blkid(device: str) -> dict:
    p = subprocess.run([_tool("blkid"), "-p", "-o", "export", device], capture_output=True,
                       text=True)
    return dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)


#: the kernel's own answer, to anyone who may open the mount point (Linux 6.5 for the UUID):
#: FS_IOC_GETFSLABEL = _IOR(0x94, 49, char[256]), FS_IOC_GETFSUUID = _IOR(0x15, 0, struct
#: fsuuid2 {u8 len; u8 uuid[16]})
FS_IOC_GETFSLABEL, FS_IOC_GETFSUUID = 0x81009431, 0x80111500


def file_system_identity(mount: str, device: str) -> dict:
    """A mounted file system's LABEL and UUID. The nightly's checks run as an unprivileged
    account, which may not read the block device that blkid probes: ask the file system
    through its mount point first, blkid where the kernel or file system cannot say."""
    import fcntl
    import uuid

    out: dict = {}
    try:
        fd = os.open(mount, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        fd = None
    if fd is not None:
        try:
            label = fcntl.ioctl(fd, FS_IOC_GETFSLABEL, bytes(256)).split(b"\0", 1)[0]
            out["LABEL"] = label.decode(errors="replace") if label else None
            raw = fcntl.ioctl(fd, FS_IOC_GETFSUUID, bytes(17))
            if raw[0] == 16:
                out["UUID"] = str(uuid.UUID(bytes=bytes(raw[1:17])))
        except OSError:
            pass
        finally:
            os.close(fd)
    if "UUID" not in out and device.startswith("/dev/"):
        return {**out, **_blkid(device)}
    return out


def fstab_entry(fstab: pathlib.Path, mount: str) -> dict:
    for line in (_read(fstab) or "").splitlines():
        fields_ = line.split()
        # `/mnt/localdisk/` and `/mnt/localdisk` name one mount point (Oracle's tips write the first)
        if (len(fields_) >= 4 and not fields_[0].startswith("#")
                and fields_[1].rstrip("/") == mount.rstrip("/")):
            return {"spec": fields_[0], "fstype": fields_[2], "options": fields_[3]}
    return {}


def hardware(facts: dict) -> dict:
    """The node's state in the places its facts name."""
    out = numa_layout(pathlib.Path(facts.get("bios_sysfs_root") or "/sys"))
    if facts.get("rdma_device"):
        port = (pathlib.Path(facts.get("rdma_sysfs_root") or "/sys") / "class/infiniband"
                / str(facts["rdma_device"]) / "ports" / str(facts.get("rdma_port", 1)))
        out["rdma"] = {"state": _read(port / "state"), "phys_state": _read(port / "phys_state")}
    meminfo = _read(facts.get("hugepages_meminfo") or "/proc/meminfo") or ""
    m = re.search(r"^HugePages_Total:\s+(\d+)", meminfo, re.M)
    out["hugepages_total"] = int(m.group(1)) if m else None
    mount = facts.get("nvme_scratch_mount")
    if mount:
        mounted = _findmnt(mount)
        source = mounted.get("source", "")
        probed = file_system_identity(mount, source) if mounted else {}
        devices = facts.get("nvme_scratch_devices") or []
        out["scratch"] = {
            "mounted": bool(mounted), "source": source, "fstype": mounted.get("fstype"),
            "options": mounted.get("options", ""), "uuid": probed.get("UUID"),
            "label": probed.get("LABEL"),
            "devices": [os.path.realpath(d) for d in devices if isinstance(d, str)],
            "fstab": fstab_entry(pathlib.Path(facts.get("nvme_scratch_fstab") or "/etc/fstab"),
                                 mount)}
    return out


def kernel_options(options: str) -> set[str]:
    """The options of an fstab entry the kernel's mount table shows."""
    out = set()
    for opt in options.split(","):
        if opt in _DEFAULT_KERNEL_OPTIONS:
            out.update(_DEFAULT_KERNEL_OPTIONS[opt])
        elif opt and opt not in _USERSPACE_OPTIONS and not opt.startswith("x-"):
            out.add(opt)
    return out


def hardware_problems(text: str, facts_text: str) -> list[str]:
    """mismatches() of the one `hardware` record in a job's output, against the facts
    (JSON: hostvars by host) of the node it names."""
    found = [r for r in parse(text) if r["kind"] == "hardware"]
    if len(found) != 1:
        return [f"{len(found)} hardware records, expected 1"]
    host = found[0]["host"]
    return mismatches(host, json.loads(facts_text).get(host, {}), found[0]["found"])


def mismatches(node: str, facts: dict, found: dict) -> list[str]:
    """Where a node's state differs from its Ansible facts, one line each, naming the node;
    facts the inventory does not state are not compared."""
    out = []

    def differ(what, expected, actual, detail=""):
        if expected != actual:
            out.append(f"{node}: {what}: inventory says {expected}, node has {actual}{detail}")

    if facts.get("bios_nps") is not None:
        nps = int(facts["bios_nps"])
        sockets = found["sockets"] or 1
        differ("NUMA nodes (sockets x NPS)", sockets * max(nps, 1) if nps else 1,
               found["numa_nodes"])
    if facts.get("bios_smt") is not None:
        smt_on = found["smt_active"] == "1"
        differ("SMT", "on" if facts["bios_smt"] else "off", "on" if smt_on else "off",
               f" (smt/active {found['smt_active']}, smt/control {found['smt_control']})")
    if facts.get("hugepages_2m_count") is not None:
        differ("2 MB huge pages", int(facts["hugepages_2m_count"]), found["hugepages_total"])
    rdma = found.get("rdma")
    if facts.get("rdma_device") and rdma is not None:
        # the kernel's port state, e.g. `4: ACTIVE`; `1: DOWN` or none: no RDMA traffic
        state = (rdma.get("state") or "").split(":")[-1].strip() or "absent"
        if state != "ACTIVE":
            out.append(f"{node}: RDMA link {facts['rdma_device']} port "
                       f"{facts.get('rdma_port', 1)} is {state} (physical state "
                       f"{rdma.get('phys_state') or 'absent'}), inventory says it carries MPI")
    scratch = found.get("scratch")
    if facts.get("nvme_scratch_mount") and scratch is not None:
        mount = facts["nvme_scratch_mount"]
        if not scratch["mounted"]:
            out.append(f"{node}: nothing is mounted at {mount}")
            return out
        differ(f"{mount} file system", "xfs", scratch["fstype"])
        if len(scratch["devices"]) == 1 and not re.fullmatch(
                re.escape(scratch["devices"][0]) + r"p?\d+", scratch["source"] or ""):
            # the device itself, or its partition (a file system the role adopted)
            differ(f"{mount} device", scratch["devices"][0], scratch["source"])
        if facts.get("nvme_scratch_label"):
            differ(f"{mount} label", facts["nvme_scratch_label"], scratch["label"])
        fstab = scratch["fstab"]
        # by UUID (the role's own entry) or by its label (an adopted file system's)
        if fstab.get("spec") != f"LABEL={scratch['label']}" or not scratch["label"]:
            differ(f"{mount} fstab entry", f"UUID={scratch['uuid']}", fstab.get("spec"))
        if facts.get("nvme_scratch_mount_opts"):
            differ(f"{mount} fstab options", facts["nvme_scratch_mount_opts"],
                   fstab.get("options"))
            missing = kernel_options(facts["nvme_scratch_mount_opts"]) - set(
                scratch["options"].split(","))
            if missing:
                out.append(f"{node}: {mount} is mounted without {','.join(sorted(missing))} "
                           f"(options {scratch['options']}), inventory says "
                           f"{facts['nvme_scratch_mount_opts']}")
    return out


# judging the staging flow -------------------------------------------------------------
def owned_processors(hosts: list[str], ranks_per_node: int) -> dict[str, set[str]]:
    """The processor directories of each host's ranks, in Slurm's block layout."""
    return {h: {f"processor{r}" for r in range(i * ranks_per_node, (i + 1) * ranks_per_node)}
            for i, h in enumerate(hosts)}


def _describe(parts: dict) -> str:
    return ", ".join(f"{name} ({p['files']} files, {p['bytes']} bytes, {p['sha256'][:12]})"
                     for name, p in sorted(parts.items())) or "nothing"


def _differences(want: dict, got: dict) -> str:
    names = sorted(n for n in set(want) | set(got) if want.get(n) != got.get(n))
    return "; ".join(f"{n}: expected {_describe({n: want[n]}) if n in want else 'none'}, "
                     f"found {_describe({n: got[n]}) if n in got else 'none'}" for n in names)


def staging_problems(text: str, ranks_per_node: int) -> list[str]:
    """What is wrong with a seven-step run, judged from the records in its job's output:
    the `layout` (hosts in rank order, the head first), `tree` records labelled shared,
    stage-in, decompose, reconstruct, stage-out from the head, fan-out and solve from every
    node, collect from the head. [] when every step moved exactly the bytes it should."""
    records = parse(text)
    layouts = [r["hosts"] for r in records if r["kind"] == "layout"]
    if not layouts:
        return ["no layout record"]
    hosts = layouts[0]
    trees = {(r["label"], r["host"]): r["parts"] for r in records if r["kind"] == "tree"}
    head, others = hosts[0], hosts[1:]
    owned = owned_processors(hosts, ranks_per_node)
    every = set().union(*owned.values())
    out: list[str] = []

    def get(label, host):
        if (label, host) not in trees:
            out.append(f"{label}: no record from {host}")
        return trees.get((label, host))

    def compare(step, want, got, where):
        if want is not None and got is not None and want != got:
            out.append(f"{step}: {where}: {_differences(want, got)}")

    # 1 the head's NVMe copy is the shared case, byte for byte
    compare("stage-in", get("shared", head), get("stage-in", head), f"{head}'s copy of the case")
    # 2 one processor dir per rank, on the head
    decomposed = get("decompose", head)
    if decomposed is not None and set(decomposed) - {"case"} != every:
        out.append(f"decompose: {head} has {sorted(set(decomposed) - {'case'})}, expected "
                   f"{len(every)} processor dirs")
    # 3 each other node gets the case and its own ranks' dirs as the head has them
    for h in others:
        if decomposed is not None:
            compare("fan-out", {p: decomposed[p] for p in {"case"} | owned[h] if p in decomposed},
                    get("fan-out", h), h)
    # 4-5 every node still holds only its own ranks' dirs (the head: all), each rewritten
    for h in hosts:
        before, after = trees.get(("fan-out", h)) or decomposed, get("solve", h)
        if after is None or before is None:
            continue
        held = set(after) - {"case"}
        if held != (every if h == head else owned[h]):
            out.append(f"solve: {h} holds {sorted(held)}, expected only {sorted(owned[h])}")
        out += [f"solve: {p} on {h} was not rewritten by the solver" for p in sorted(owned[h])
                if p in after and after[p] == before.get(p)]
    # 6 the head's processor dirs are then each owner's
    collected = get("collect", head)
    if collected is not None:
        for h in hosts:
            solved = trees.get(("solve", h)) or {}
            compare("collect", {p: solved.get(p) for p in owned[h]},
                    {p: collected.get(p) for p in owned[h]}, f"{head}'s copies of {h}'s dirs")
    # 7 the shared case is the head's, without processor dirs
    reconstructed, shared = get("reconstruct", head), get("stage-out", head)
    if reconstructed is not None:
        compare("stage-out", {"case": reconstructed.get("case")}, shared, "the shared case")
    return out


def field_problems(text: str, label: str, reference: str) -> list[str]:
    """Where the fields of `label` differ from those of `reference` (their `fields`
    records in a job's output): the same latest time, the same files, each bit-identical."""
    found = {r["label"]: r for r in parse(text) if r["kind"] == "fields"}
    if label not in found or reference not in found:
        return [f"no fields record of {label if label not in found else reference}"]
    a, b = found[label], found[reference]
    if a["time"] != b["time"]:
        return [f"latest time {a['time']} ({label}) against {b['time']} ({reference})"]
    if not a["fields"]:
        return [f"{label}: no fields written"]
    return [f"{name}: {label} {a['fields'].get(name, 'missing')[:12]} against {reference} "
            f"{b['fields'].get(name, 'missing')[:12]}"
            for name in sorted(set(a["fields"]) | set(b["fields"]))
            if a["fields"].get(name) != b["fields"].get(name)]


# job-side entry point ----------------------------------------------------------------
def line(kind: str, label: str, data: dict) -> str:
    return PREFIX + " " + json.dumps({"kind": kind, "label": label, "host": host(), **data},
                                     sort_keys=True)


def parse(text: str) -> list[dict]:
    """Every nodestate line of a job's output, in order."""
    return [json.loads(raw[len(PREFIX):]) for raw in text.splitlines()
            if raw.startswith(PREFIX)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="nodestate", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("tree", "fields"):
        p = sub.add_parser(name)
        p.add_argument("case", type=pathlib.Path)
        p.add_argument("--label", required=True)
    sub.add_parser("layout", help="the job's nodes in rank order")
    p = sub.add_parser("hardware")
    p.add_argument("facts", type=pathlib.Path, help="JSON: {host: Ansible hostvars}")
    args = ap.parse_args(argv)
    if args.cmd == "tree":
        print(line("tree", args.label, {"parts": tree(args.case)}))
    elif args.cmd == "fields":
        print(line("fields", args.label, fields(args.case)))
    elif args.cmd == "layout":
        nodelist = subprocess.run(["scontrol", "show", "hostnames",
                                   os.environ.get("SLURM_JOB_NODELIST", "")],
                                  capture_output=True, text=True).stdout.split()
        print(line("layout", "layout", {"hosts": nodelist}))
    else:
        try:
            facts = json.loads(args.facts.read_text()).get(host())
        except (OSError, ValueError) as e:
            print(f"nodestate: error: {args.facts}: {e}", file=sys.stderr)
            return 2
        if facts is None:
            print(f"nodestate: error: {host()} is not in {args.facts}", file=sys.stderr)
            return 2
        print(line("hardware", "hardware", {"found": hardware(facts)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
