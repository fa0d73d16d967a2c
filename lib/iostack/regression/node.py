"""The node a figure was measured on: what an absolute figure (MiB/s, seconds, CPU s/GiB) is
judged against only there (iostack.regression.references, reframe-tests/README.md "Gates").

A node is named by a key, the last part of a references file's key
(`system:partition+environment@node`):
- `class.<site>.<group>`: a node class the site declares, a Slurm partition's node group
  whose facts name its CPU model (sites/<site>.yaml): its nodes are alike, so one of them
  records the baseline of all; its partition gets the `node_class` extra
  (iostack_rfm.config);
- `<host>-<8 hex>` otherwise: this node's own identity, host name, CPU model (/proc/cpuinfo),
  machine id and the scratch file system's device and id, hashed; a fresh VM of the same
  kind (same host name, same CPU) has another machine id or file system, so another key.
  The identity itself is kept with each recorded value (`provenance.node`).

IOSTACK_NODE (tests only) names the node instead: a test plays "another node" with it.
Standard library only.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import socket

#: a test's stand-in for the node's identity: the key the node gets
NODE_ENV = "IOSTACK_NODE"
CLASS_PREFIX = "class."
#: what a key may hold (it sits in a references file's key: no ':', '+', '@' or spaces)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def _read(path: str) -> str:
    try:
        return pathlib.Path(path).read_text().strip()
    except OSError:
        return ""


def cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def _existing(path: pathlib.Path) -> pathlib.Path:
    """`path`, or its nearest existing parent (a check's directory may not exist yet)."""
    path = pathlib.Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def scratch_device(scratch) -> str:
    """The disk under `scratch`, e.g. `vda 256 GiB virtio_blk fsid 321712b35a1f095d`: its
    name, size and driver from sysfs, and the file system's id (statfs; its UUID on ext4),
    which another disk or a fresh file system does not share."""
    path = _existing(scratch)
    dev = os.stat(path).st_dev
    fsid = format(os.statvfs(path).f_fsid & (2**64 - 1), "016x")
    sysfs = pathlib.Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if not sysfs.exists():      # tmpfs, overlay, NFS: no block device of its own
        return f"{os.major(dev)}:{os.minor(dev)} fsid {fsid}"
    disk = sysfs.resolve().parent if (sysfs / "partition").exists() else sysfs.resolve()
    sectors = _read(str(disk / "size"))
    size = f"{int(sectors) * 512 / 2**30:.0f} GiB" if sectors.isdigit() else "? GiB"
    driver = pathlib.Path(os.path.realpath(disk / "device" / "driver")).name \
        if (disk / "device" / "driver").exists() else "?"
    return f"{disk.name} {size} {driver} fsid {fsid}"


def identity(scratch) -> dict[str, str]:
    """What names this node: host, CPU model, machine id, the scratch disk."""
    return {"host": socket.gethostname(), "cpu_model": cpu_model(),
            "machine_id": _read("/etc/machine-id") or "unknown",
            "scratch_device": scratch_device(scratch)}


def key_of(ident: dict[str, str]) -> str:
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:8]
    return f"{_UNSAFE.sub('_', ident.get('host', 'node'))}-{digest}"


def this_node(scratch, node_class: str | None = None,
              override: str | None = None) -> tuple[str, dict[str, str]]:
    """(key, identity) of the node a check's job runs on: `override`'s (IOSTACK_NODE, as
    iostack_rfm.context reads it: tests), the node class its partition declares, else this
    host's own (the local scheduler's jobs run here)."""
    if override:
        return _UNSAFE.sub("_", override), {"declared_by": f"{NODE_ENV}={override}"}
    if node_class:
        return CLASS_PREFIX + _UNSAFE.sub("_", node_class), {"node_class": node_class}
    ident = identity(scratch)
    return key_of(ident), ident
