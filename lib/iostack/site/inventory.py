"""A site's Ansible inventory as Ansible itself resolves it (`ansible-inventory --list`):
hosts of a group and each host's variables after group/host layering. Templated values
stay unrendered, so readers use only plain facts."""
from __future__ import annotations

import json
import pathlib
import shutil
import sys

from iostack.core import paths, process
from iostack.core.errors import IostackError


class InventoryError(IostackError):
    """The inventory could not be read."""


def _ansible_inventory() -> str:
    # the venv running (bin/iostack's, ReFrame's: the set-up's), then PATH
    bin_dir = pathlib.Path(sys.executable).parent
    if (bin_dir / "ansible-inventory").exists():
        return str(bin_dir / "ansible-inventory")
    found = shutil.which("ansible-inventory")
    if not found:
        raise InventoryError("ansible-inventory not found: run bin/iostack setup")
    return found


def load(inventory: pathlib.Path) -> dict:
    """The inventory as `ansible-inventory --list` prints it."""
    if not pathlib.Path(inventory).is_dir():
        raise InventoryError(f"no inventory at {inventory}")
    p = process.capture([_ansible_inventory(), "-i", inventory, "--list"], timeout=120,
                        env_extra={"ANSIBLE_INVENTORY_UNPARSED_WARNING": "False",
                                   "ANSIBLE_CONFIG": paths.REPO / "ansible" / "ansible.cfg"})
    if p.returncode != 0:
        raise InventoryError(f"ansible-inventory -i {inventory} failed: {p.stderr.strip()}")
    return json.loads(p.stdout)


def hosts(inv: dict, group: str) -> list[str]:
    """Hosts of a group and its child groups, in inventory order, each once."""
    out: list[str] = []
    node = inv.get(group, {})
    for host in node.get("hosts", []):
        if host not in out:
            out.append(host)
    for child in node.get("children", []):
        out += [h for h in hosts(inv, child) if h not in out]
    return out


def hostvars(inv: dict, host: str) -> dict:
    return inv.get("_meta", {}).get("hostvars", {}).get(host, {})
