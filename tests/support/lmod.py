"""Two real Lmod releases for the module tests: Debian 12's 8.6 (what the sites run today)
and Debian 13's 8.7.60 (fetched with apt into the cache, nothing installed; Lmod 8.7
refuses what 8.6 lets through), and a clean shell that runs module commands with one."""
import json
import os
import pathlib
import re
import subprocess

import pytest

DEBIAN12_LMOD = "/usr/share/lmod/lmod/libexec/lmod"
LMOD_INIT = "/usr/share/lmod/lmod/init/bash"
# Debian 13 (trixie)'s Lmod: a newer release than Debian 12's, same Lua libraries
NEWER_LMOD = ("trixie", "lmod", "8.7.60-1")
# Lmod 8.7.60, libexec/MainControl.lua, l_check_for_valid_name (family, add_property,
# remove_property): Lmod exports a family as LMOD_FAMILY_<NAME>, so a shell identifier
LMOD_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
SHOWN_CALL = re.compile(r'^(\w+)\("([^"]*)"', re.M)


def debian_apt_uri() -> str:
    """The Debian mirror this machine's apt uses (its sources say where, not this file)."""
    for source in sorted(pathlib.Path("/etc/apt").glob("sources.list*")) + sorted(
            pathlib.Path("/etc/apt/sources.list.d").glob("*")):
        if source.is_file():
            m = re.search(r"^(?:URIs:\s*|deb\s+(?:\[[^]]*\]\s+)?)(\S+/debian)/?\s", source.read_text(),
                          re.M)
            if m:
                return m.group(1)
    raise LookupError("no Debian mirror in /etc/apt sources")


def fetch_debian_lmod(cache: pathlib.Path) -> pathlib.Path:
    """libexec/lmod of Debian's `NEWER_LMOD`, downloaded with apt (nothing installed) and
    unpacked under `cache` once."""
    suite, package, version = NEWER_LMOD
    tree = cache / f"{package}-{version}-{suite}"
    lmod = tree / "usr/share/lmod/lmod/libexec/lmod"
    if lmod.exists():
        return lmod
    work = cache / f"apt-{suite}"
    for d in ("lists/partial", "cache/archives/partial"):
        (work / d).mkdir(parents=True, exist_ok=True)
    (work / "sources.list").write_text(
        f"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] {debian_apt_uri()} "
        f"{suite} main\n")
    options = [f"-oDir::Etc::SourceList={work}/sources.list", "-oDir::Etc::SourceParts=/dev/null",
               f"-oDir::State::Lists={work}/lists", f"-oDir::Cache={work}/cache",
               "-oAcquire::Languages=none", "-oAPT::Sandbox::User=root"]
    options += [f"-oAcquire::IndexTargets::deb::{t}::DefaultEnabled=false" for t in (
        "DEP-11", "DEP-11-icons", "DEP-11-icons-small", "DEP-11-icons-large",
        "DEP-11-icons-hidpi", "DEP-11-icons-large-hidpi")]
    for cmd in (["apt-get", *options, "update"],
                ["apt-get", *options, "download", f"{package}={version}"]):
        p = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            pytest.fail(f"apt could not fetch {package} {version} from Debian {suite}: "
                        f"{(p.stderr.strip() or p.stdout.strip()).splitlines()[-1]}")
    (deb,) = work.glob(f"{package}_*.deb")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tree)], check=True)
    return lmod




def lmod_command(release: str, cache: pathlib.Path) -> str:
    """libexec/lmod of `release` (debian12: the node's; debian13: fetched into `cache`)."""
    if release == "debian12":
        return DEBIAN12_LMOD
    if os.geteuid() != 0:
        pytest.skip("apt-get download of Debian 13's Lmod runs as root here")
    return str(fetch_debian_lmod(cache / "debian"))


def run(lmod_cmd: str, script: str, module_path: pathlib.Path | None = None, cwd=None):
    """Module commands with this Lmod in a clean bash: (rc, environment after, stderr)."""
    use = f"module use {module_path} && " if module_path else ""
    full = (f'module() {{ eval "$($LMOD_CMD bash "$@")"; }}; {use}{script} && '
            "python3 -c 'import json,os; print(json.dumps(dict(os.environ)))'")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LMOD", "MODULE", "_ModuleTable", "__LMOD"))}
    env["LMOD_CMD"] = lmod_cmd
    p = subprocess.run(["bash", "--noprofile", "--norc", "-c", full], capture_output=True,
                       text=True, env=env, cwd=cwd)
    out = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {}
    return p.returncode, out, p.stderr
