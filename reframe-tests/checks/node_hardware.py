"""Each node is what the site's Ansible inventory says it is: its NUMA layout (sockets x
bios_nps), SMT state (bios_smt), 2 MB huge page pool (hugepages_2m_count) and node-local
scratch (nvme_scratch_mount: an XFS from the inventory's device, with its label, mounted
with the inventory's options, by the UUID its fstab entry names). Facts the inventory does
not state are not compared.

Run it on every node at once with ReFrame's `--distribute` (one test per node, each pinned
to its node):

    reframe -C reframe-tests/config/local.py --system local-cluster \\
        -c reframe-tests/checks/node_hardware.py --distribute=all -r

The job reads the node's state where the node's facts point (bios_sysfs_root, the fstab
the nvme_scratch role writes); a mismatch fails the test with one line per difference,
each naming the node. The inventory is ansible/inventories/<system>, or the site's when
the system has none of its own (`-S NodeHardwareCheck.inventory=DIR` to choose).
"""
import json
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_before, sanity_function, variable

from iostack.core import paths
from iostack.site import inventory as ansible_inventory
from iostack_rfm import context
from iostack_rfm.jobs import nodestate
from iostack_rfm.base import IostackMixin, parsed

FACTS = 'node-facts.json'


@rfm.simple_test
class NodeHardwareCheck(IostackMixin, rfm.RunOnlyRegressionTest):
    descr = "a node's NUMA layout, SMT, huge pages and scratch mount match the inventory"
    valid_systems = ['+nvme']
    valid_prog_environs = ['*']
    num_tasks = 1
    tags = {'hardware', 'nightly'}
    #: the Ansible inventory describing the nodes (default: the system's, else the site's)
    inventory = variable(str, value='')

    def inventory_dir(self):
        if self.inventory:
            return self.inventory
        system = self.current_system.name
        own = paths.ANSIBLE_INVENTORIES / system
        return str(own if own.is_dir() else
                   paths.ANSIBLE_INVENTORIES / context.site_of(self.current_partition))

    @run_before('run')
    def write_facts(self):
        inv = ansible_inventory.load(self.inventory_dir())
        facts = {h: ansible_inventory.hostvars(inv, h)
                 for h in ansible_inventory.hosts(inv, 'all')}
        with open(os.path.join(self.stagedir, FACTS), 'w') as f:
            json.dump(facts, f, indent=1, sort_keys=True)
        self.executable = f'python3 -m iostack_rfm.jobs.nodestate hardware {FACTS}'

    @sanity_function
    def validate(self):
        return sn.assert_eq(parsed(nodestate.hardware_problems, self.stdout, FACTS), [],
                            msg='{0}')
