"""The hand-written meta-modules under real Lmod, two releases: Debian 12's 8.6 (what the
sites run today) and Debian 13's 8.7.60 (fetched with apt into the cache; Lmod 8.7 refuses
what 8.6 lets through). Load, default version, swap, unload, family, spider; every command
must leave stderr empty (Lmod 8.6 prints bash errors for a bad family name and still exits
0). And the rules of Lmod 8.7 on every version of every meta-module, read from `module show`.

Spack generates eccodes/fdb/openifs modules only at deploy time (the spack tier loads the
real ones); here a tree of minimal modules with those names stands in for them."""
import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from iostack.core import paths
from iostack.deployment import deploy

LMOD_INIT = "/usr/share/lmod/lmod/init/bash"
pytestmark = pytest.mark.skipif(not os.path.exists(LMOD_INIT), reason="Lmod not installed (apt: lmod)")

STANDINS = {"eccodes/2.28.0": "ECCODES", "fdb/5.10.8": "FDB", "openifs/49r1": "OPENIFS"}
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


@pytest.fixture(scope="module", params=["debian12", "debian13"])
def lmod_cmd(request, tmp_path_factory):
    if request.param == "debian12":
        return "/usr/share/lmod/lmod/libexec/lmod"
    if os.geteuid() != 0:
        pytest.skip("apt-get download of Debian 13's Lmod runs as root here")
    return str(fetch_debian_lmod(paths.cache() / "debian"))


@pytest.fixture
def root(tmp_path):
    core = tmp_path / "modulefiles" / "Core"
    for mod, var in STANDINS.items():
        f = core / f"{mod}.lua"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f'setenv("{var}_ROOT", "/opt/{mod}")\n')
    (tmp_path / "etc" / "fdb5").mkdir(parents=True)
    (tmp_path / "etc" / "fdb5" / "config.yaml").write_text("type: local\n")
    deploy.install_meta_modules(tmp_path)
    return tmp_path


@pytest.fixture
def lmod(lmod_cmd, root):
    def run(script):
        """Run module commands with this Lmod in a clean bash; (rc, environment, stderr)."""
        full = (f'module() {{ eval "$($LMOD_CMD bash "$@")"; }}; '
                f"module use {root}/modulefiles/Core && {script} && "
                "python3 -c 'import json,os; print(json.dumps(dict(os.environ)))'")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("LMOD", "MODULE", "_ModuleTable", "__LMOD"))}
        env["LMOD_CMD"] = lmod_cmd
        p = subprocess.run(["bash", "--noprofile", "--norc", "-c", full], capture_output=True,
                           text=True, env=env)
        out = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else {}
        return p.returncode, out, p.stderr
    return run


def words(text):
    return " ".join(text.split())


def test_default_version_is_marked_and_loaded(lmod, root):
    rc, _, err = lmod("module avail openifs-env 2>&1 | tee /dev/stderr >/dev/null")
    assert rc == 0
    assert "openifs-env/0.0.2 (D)" in err.replace("  ", " ")
    rc, env, err = lmod("module load openifs-env")
    assert (rc, err) == (0, "")
    assert "openifs-env/0.0.2" in env["LOADEDMODULES"].split(":")
    assert env["LMOD_FAMILY_OPENIFS_ENV"] == "openifs-env"
    assert env["IOSTACK_OIFS_OUTPUT"] == "fdb"
    assert env["FDB_ROOT"] == "/opt/fdb/5.10.8" and env["OPENIFS_ROOT"] == "/opt/openifs/49r1"
    assert env["FDB5_CONFIG_FILE"] == str(root / "etc" / "fdb5" / "config.yaml")
    assert "FDB_ASYNC_WRITE" not in env


def test_grib_only_version_does_not_load_fdb(lmod):
    rc, env, err = lmod("module load openifs-env/0.0.1")
    assert (rc, err) == (0, "")
    assert env["IOSTACK_OIFS_OUTPUT"] == "grib"
    assert "FDB_ROOT" not in env and "FDB5_CONFIG_FILE" not in env
    assert env["ECCODES_ROOT"] == "/opt/eccodes/2.28.0"


def test_swap_changes_version_and_settings(lmod):
    rc, env, err = lmod("module load openifs-env && module swap openifs-env openifs-env/0.0.3")
    assert rc == 0
    # Lmod's notice of the swap is the only thing on stderr
    assert words(err) == ("The following have been reloaded with a version change: "
                          "1) openifs-env/0.0.2 => openifs-env/0.0.3")
    loaded = env["LOADEDMODULES"].split(":")
    assert "openifs-env/0.0.3" in loaded and "openifs-env/0.0.2" not in loaded
    assert env["FDB_ASYNC_WRITE"] == "1"


def test_unload_keeps_what_the_user_loaded_before(lmod):
    # depends_on, not load: fdb was the user's, eccodes came with openifs-env
    rc, env, err = lmod("module load fdb && module load openifs-env && module unload openifs-env")
    assert (rc, err) == (0, "")
    assert env["LOADEDMODULES"].split(":") == ["fdb/5.10.8"]
    assert "ECCODES_ROOT" not in env and "LMOD_FAMILY_OPENIFS_ENV" not in env


def test_family_replaces_rather_than_stacks(lmod):
    # Loading a second version of the family replaces the first (Lmod's family rule).
    rc, env, err = lmod("module load openifs-env/0.0.3 && module load openifs-env/0.0.1")
    assert rc == 0, err
    assert [m for m in env["LOADEDMODULES"].split(":") if m.startswith("openifs-env")] == ["openifs-env/0.0.1"]
    assert "FDB_ASYNC_WRITE" not in env


def test_spider_describes_the_default_version(lmod):
    rc, _, err = lmod("module whatis openifs-env 2>&1 | tee /dev/stderr >/dev/null")
    assert rc == 0
    default = re.search(r"Description\s*:\s*(.*)", err).group(1)
    rc, _, err = lmod("module spider openifs-env 2>&1 | tee /dev/stderr >/dev/null")
    assert rc == 0
    described = re.search(r"Description:\s*(.*?)\n\s*\n", err, re.S).group(1)
    assert words(described) == words(default)
    assert "openifs-env/0.0.2" in words(err)


def test_missing_dependency_is_an_error(lmod, root):
    shutil.rmtree(root / "modulefiles" / "Core" / "fdb")
    rc, _, err = lmod("module load openifs-env")
    assert rc != 0
    assert "fdb" in err


def test_a_version_without_settings_is_refused(lmod, root):
    d = root / "modulefiles" / "Core" / "openifs-env"
    (d / "9.9.9.lua").symlink_to(".openifs-env.lua")
    rc, _, err = lmod("module load openifs-env/9.9.9")
    assert rc != 0
    assert "no settings for version 9.9.9" in words(err)


def meta_module_versions():
    return [f"{d.name}/{f.stem}" for d in sorted(paths.META_MODULES.iterdir()) if d.is_dir()
            for f in sorted(d.glob("*.lua")) if not f.name.startswith(".")]


@pytest.mark.parametrize("module", meta_module_versions())
def test_every_meta_module_follows_newer_lmod_rules(lmod, module):
    """What each version does, as Lmod shows it: family names Lmod 8.7 accepts, variables
    a shell can export, and other modules pulled in with depends_on (Lmod's "Dependent
    Modules": load() would unload them on unload even if the user had loaded them)."""
    rc, _, shown = lmod(f"module show {module} 2>&1 | tee /dev/stderr >/dev/null")
    assert rc == 0 and "Lmod has detected" not in shown, shown
    calls = SHOWN_CALL.findall(shown)
    assert calls, shown
    for name, arg in calls:
        if name in ("family", "add_property", "remove_property"):
            assert LMOD_NAME.match(arg), f"{module}: {name}({arg!r}) is refused by Lmod 8.7"
        if name in ("setenv", "pushenv", "prepend_path", "append_path", "unsetenv"):
            assert LMOD_NAME.match(arg), f"{module}: {name}({arg!r}) is no shell variable"
        assert name not in ("load", "always_load", "try_load"), \
            f"{module}: {name}({arg!r}): a meta-module depends_on() what it needs"
    assert any(n == "whatis" and a.startswith("Description: ") for n, a in calls)


def test_lmod_syntax_check_passes():
    checker = "/usr/share/lmod/lmod/libexec/check_module_tree_syntax"
    if not os.path.exists(checker):
        pytest.skip("Lmod's check_module_tree_syntax not installed")
    p = subprocess.run([checker, str(paths.META_MODULES)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
