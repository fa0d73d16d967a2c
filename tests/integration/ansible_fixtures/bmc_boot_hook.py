"""A local-cluster node's firmware at boot, for the rolling BIOS test: a reboot hook
(/run/iostack-node/reboot.d, run by the cluster's RebootProgram inside the node) that
resets the node's BMC stand-in (redfish_mock.py applies its pending BIOS settings then, as
a real BMC does at POST) and renders the node's emulated sysfs from the attributes now
current: NUMA nodes = packages x NumaNodesPerSocket, SMT as LogicalProc says.

Run: python bmc_boot_hook.py CONFIG.json   ({url, user, password, ca, sysfs})
"""
from __future__ import annotations

import base64
import json
import pathlib
import shutil
import ssl
import sys
import urllib.request

from iostack_testbed.cluster import emulated_sysfs

SYS = "/redfish/v1/Systems/System.Embedded.1"


def call(config: dict, path: str, body: dict | None = None):
    request = urllib.request.Request(
        config["url"] + path, method="POST" if body is not None else "GET",
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json", "Authorization": "Basic " + base64.b64encode(
            f"{config['user']}:{config['password']}".encode()).decode()})
    context = ssl.create_default_context(cafile=config["ca"])
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        raw = response.read()
        return json.loads(raw) if raw else None


def main(config_file: str) -> int:
    config = json.loads(pathlib.Path(config_file).read_text())
    call(config, f"{SYS}/Actions/ComputerSystem.Reset", {"ResetType": "GracefulRestart"})
    attributes = call(config, f"{SYS}/Bios")["Attributes"]
    sysfs = pathlib.Path(config["sysfs"])
    if sysfs.exists():
        shutil.rmtree(sysfs)
    emulated_sysfs(sysfs, int(attributes["NumaNodesPerSocket"]),
                   smt=attributes["LogicalProc"] == "Enabled")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
