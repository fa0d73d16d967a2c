#!/usr/bin/python
# Reads NUMA/socket/SMT topology from a sysfs tree. Read-only; the sysfs root
# is a parameter so tests can point it at fixture trees.
from __future__ import annotations

DOCUMENTATION = r"""
module: iostack_numa_topology
short_description: Read NUMA node, socket and SMT state from sysfs
description:
  - Counts C(nodeN) directories under C(<sysfs_root>/devices/system/node),
    distinct C(physical_package_id) values of the CPUs, and reads
    C(devices/system/cpu/smt/{active,control}). Changes nothing.
options:
  sysfs_root:
    description: Root of the sysfs tree (C(/sys) on a real node).
    type: path
    default: /sys
author: iostack
"""

EXAMPLES = r"""
- name: Read topology
  iostack_numa_topology:
    sysfs_root: /sys
  register: topo
"""

RETURN = r"""
numa_nodes:
  description: Number of NUMA nodes (nodeN directories).
  type: int
  returned: always
sockets:
  description: Number of distinct physical packages among the CPUs.
  type: int
  returned: always
smt_active:
  description: Content of smt/active, or null when absent.
  type: str
  returned: always
smt_control:
  description: Content of smt/control (on, off, forceoff, notsupported, notimplemented) or null.
  type: str
  returned: always
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule

_NODE_RE = re.compile(r"^node[0-9]+$")
_CPU_RE = re.compile(r"^cpu[0-9]+$")


def _read(path):
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return None


def read_topology(sysfs_root):
    """Return the topology dict for a sysfs tree rooted at sysfs_root."""
    node_dir = os.path.join(sysfs_root, "devices/system/node")
    cpu_dir = os.path.join(sysfs_root, "devices/system/cpu")
    nodes = []
    if os.path.isdir(node_dir):
        nodes = sorted(n for n in os.listdir(node_dir)
                       if _NODE_RE.match(n) and os.path.isdir(os.path.join(node_dir, n)))
    packages = set()
    if os.path.isdir(cpu_dir):
        for cpu in os.listdir(cpu_dir):
            if not _CPU_RE.match(cpu):
                continue
            pkg = _read(os.path.join(cpu_dir, cpu, "topology/physical_package_id"))
            if pkg is not None:
                packages.add(pkg)
    return {
        "numa_nodes": len(nodes),
        "numa_node_names": nodes,
        "sockets": len(packages),
        "smt_active": _read(os.path.join(cpu_dir, "smt/active")),
        "smt_control": _read(os.path.join(cpu_dir, "smt/control")),
    }


def main():
    module = AnsibleModule(
        argument_spec={"sysfs_root": {"type": "path", "default": "/sys"}},
        supports_check_mode=True,
    )
    root = module.params["sysfs_root"]
    if not os.path.isdir(os.path.join(root, "devices/system")):
        module.fail_json(msg=f"{root} does not look like a sysfs tree (no devices/system)")
    module.exit_json(changed=False, **read_topology(root))


if __name__ == "__main__":
    main()
