"""Shared helpers for the Ansible integration tests (run playbooks, make fixtures)."""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import socket
import subprocess
import sys

FIXTURES = pathlib.Path(__file__).resolve().parent
REPO = FIXTURES.parents[2]
ANSIBLE_DIR = REPO / "ansible"
ROLE_PLAYBOOK = FIXTURES / "role.yml"


@dataclasses.dataclass
class Run:
    rc: int
    data: dict
    stdout: str
    stderr: str

    @property
    def stats(self) -> dict:
        return self.data.get("stats", {}).get("localhost", {})

    @property
    def changed(self) -> int:
        return self.stats.get("changed", -1)

    @property
    def failed(self) -> int:
        return self.stats.get("failures", 0)

    def results(self):
        """Every (task name, host result) in run order; loop items flattened."""
        for play in self.data.get("plays", []):
            for task in play.get("tasks", []):
                for res in task.get("hosts", {}).values():
                    yield task["task"]["name"], res
                    for item in res.get("results", []) or []:
                        if isinstance(item, dict):
                            yield task["task"]["name"], item

    def messages(self) -> str:
        """All msg values (plans, failures) as one text blob for asserts."""
        out = []
        for _, res in self.results():
            msg = res.get("msg")
            if isinstance(msg, list):
                out.extend(str(m) for m in msg)
            elif msg is not None:
                out.append(str(msg))
        return "\n".join(out)

    def changed_tasks(self) -> list[str]:
        return [name for name, res in self.results() if res.get("changed") and "results" not in res]

    def explain(self) -> str:
        return f"rc={self.rc}\nmessages:\n{self.messages()}\nstderr:\n{self.stderr[-3000:]}"


def ansible_env(venv_bin: pathlib.Path) -> dict:
    env = dict(os.environ)
    env.update(
        ANSIBLE_CONFIG=str(ANSIBLE_DIR / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
        ANSIBLE_LOCALHOST_WARNING="False",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="False",
        PATH=f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


def run_playbook(venv_bin, playbook, extra_vars: dict, tmp_path, *, check=False,
                 inventory=None, timeout=300) -> Run:
    """Run a playbook against localhost with extra vars from a JSON file."""
    vars_file = pathlib.Path(tmp_path) / f"vars-{os.getpid()}-{id(extra_vars)}.json"
    vars_file.write_text(json.dumps({"ansible_python_interpreter": sys.executable, **extra_vars}))
    args = [str(venv_bin / "ansible-playbook"), "-e", f"@{vars_file}", str(playbook)]
    args += ["-i", str(inventory)] if inventory else ["-i", "localhost,", "-c", "local"]
    if check:
        args.append("--check")
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                          env=ansible_env(venv_bin), cwd=str(REPO))
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        data = {}
    return Run(proc.returncode, data, proc.stdout, proc.stderr)


def run_role(venv_bin, role, extra_vars: dict, tmp_path, *, check=False, gather=False) -> Run:
    return run_playbook(venv_bin, ROLE_PLAYBOOK,
                        {"test_role": role, "test_gather": gather, **extra_vars}, tmp_path, check=check)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_cert(directory: pathlib.Path, address: str = "127.0.0.1") -> tuple[pathlib.Path, pathlib.Path]:
    """Self-signed certificate for an IP address, 127.0.0.1 by default (python cryptography)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, address)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(address))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "bmc-cert.pem", directory / "bmc-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def make_sysfs(root: pathlib.Path, *, sockets: int, numa_nodes: int, cpus_per_socket: int = 4,
               smt_control: str | None = "notsupported", smt_active: str | None = "0") -> pathlib.Path:
    """A minimal sysfs tree: nodeN dirs, CPU package ids and smt/{control,active}."""
    node_dir = root / "devices/system/node"
    node_dir.mkdir(parents=True)
    (node_dir / "online").write_text(f"0-{numa_nodes - 1}\n")
    for n in range(numa_nodes):
        (node_dir / f"node{n}").mkdir()
    cpu_dir = root / "devices/system/cpu"
    for cpu in range(sockets * cpus_per_socket):
        topo = cpu_dir / f"cpu{cpu}/topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{cpu // cpus_per_socket}\n")
    smt = cpu_dir / "smt"
    smt.mkdir(parents=True)
    if smt_control is not None:
        (smt / "control").write_text(smt_control + "\n")
    if smt_active is not None:
        (smt / "active").write_text(smt_active + "\n")
    return root
