"""The Debian packages a node needs, by purpose and release (system-packages.toml), and
which of them dpkg lists as installed. Standard library only: set-up runs it before the
venv exists."""
import pathlib
import shutil
import tomllib

from iostack.core import paths
from iostack.core.errors import IostackError
from iostack.core.process import capture

SYSTEM_PACKAGES = paths.REPO / "system-packages.toml"
#: what each purpose adds; `bin/iostack test` needs all of them
PURPOSES = ("deploy", "nightly", "tests")
OS_RELEASE = pathlib.Path("/etc/os-release")


def os_release(path: pathlib.Path = OS_RELEASE) -> dict[str, str]:
    """/etc/os-release as a dict (os-release(5): KEY=value, the value maybe quoted)."""
    info = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.startswith("#"):
            info[key.strip()] = value.strip().strip("'\"")
    return info


def known_releases() -> dict[str, str]:
    return table()["releases"]


def table() -> dict:
    with open(SYSTEM_PACKAGES, "rb") as f:
        return tomllib.load(f)


def debian_release(info: dict[str, str]) -> str:
    """The codename of a Debian release set-up knows; SetupRefused for any other OS."""
    codename = info.get("VERSION_CODENAME", "")
    if info.get("ID") == "debian" and codename in known_releases():
        return codename
    known = ", ".join(f"{name} ({codename})" for codename, name in known_releases().items())
    raise SetupRefused(
        f"set-up knows {known}, not {info.get('PRETTY_NAME') or 'this OS'}: install the "
        f"equivalents of {SYSTEM_PACKAGES.name} with this system's tools, then run set-up "
        "with --skip-apt")


def apt_packages(release: str = "bookworm", purposes=("deploy",)) -> list[str]:
    """The Debian packages of `purposes` on `release`, in file order, each once."""
    listed = table()
    names = []
    for purpose in purposes:
        for entry in listed[purpose]["packages"]:
            name = entry[release] if isinstance(entry, dict) else entry
            if name not in names:
                names.append(name)
    return names


class SetupRefused(IostackError):
    """Set-up cannot go on; the message is the one line the admin sees."""


def missing_apt_packages(pkgs):
    """`pkgs` that dpkg does not list as installed. dpkg-query -W prints one line per package
    it knows, installed or not; the architecture of a never-installed one is empty, so the
    fields are tab-separated, not split on whitespace."""
    out = capture(["dpkg-query", "-W", "-f=${Package}\t${Architecture}\t${db:Status-Status}\n",
                   *pkgs]).stdout
    native = capture(["dpkg", "--print-architecture"]).stdout.strip()
    installed = set()
    for line in out.splitlines():
        name, arch, status = (line.split("\t") + ["", ""])[:3]
        if status == "installed":
            installed.add(f"{name}:{arch}")
            if arch in (native, "all"):
                installed.add(name)
    return [p for p in pkgs if p not in installed]




def missing_on_this_node(purpose: str) -> list[str]:
    """Packages of `purpose` this Debian node lacks; none on a node set-up does not know
    (a Cray or Oracle Linux login node brings its own)."""
    if not shutil.which("dpkg-query") or not OS_RELEASE.is_file():
        return []
    try:
        release = debian_release(os_release())
    except SetupRefused:
        return []
    return missing_apt_packages(apt_packages(release, (purpose,)))
