"""The hand-written meta-modules (modulefiles/) on the tree a deploy writes: the `local`
site deployed from source (fdb under openmpi/<version>/Core, Spack's hierarchy), under
real Lmod, Debian 12's 8.6 and Debian 13's 8.7.60. Every version of every meta-module
loads as modulefiles/README.md shows it, the README's own commands run as written, and
every command leaves stderr empty (Lmod 8.6 prints bash errors for a bad family name and
still exits 0); and the rules of Lmod 8.7 hold for every version, read from `module show`."""
import re
import shutil

import pytest
from support import lmod as lmodtool

from iostack.core import paths
from iostack.deployment import deploy
from support import targets

pytestmark = pytest.mark.skipif(not shutil.which("bash") or not
                                __import__("os").path.exists(lmodtool.LMOD_INIT),
                                reason="Lmod not installed (apt: lmod)")


def meta_module_versions():
    return [f"{d.name}/{f.stem}" for d in sorted(paths.META_MODULES.iterdir()) if d.is_dir()
            for f in sorted(d.glob("*.lua")) if not f.name.startswith(".")]


@pytest.fixture(scope="module", params=["debian12", "debian13"])
def lmod_cmd(request):
    return lmodtool.lmod_command(request.param, targets.settings().cache)


@pytest.fixture(scope="module")
def tree(local_deploy):
    """The deployed tree as users reach it: <root>/current/modulefiles/Core."""
    root, _ = local_deploy
    return root / "current" / "modulefiles" / "Core"


@pytest.fixture
def lmod(lmod_cmd, tree, tmp_path):
    def run(script, module_path=tree):
        return lmodtool.run(lmod_cmd, script, module_path, cwd=tmp_path)
    return run


def words(text):
    return " ".join(text.split())


def readme_commands():
    """modulefiles/README.md's shell block, command by command, comments dropped."""
    text = (paths.META_MODULES / "README.md").read_text()
    (block,) = re.findall(r"```sh\n(.*?)```", text, re.S)
    return [line.split("#")[0].strip() for line in block.splitlines()
            if line.split("#")[0].strip()]


def test_the_readme_runs_as_written(lmod, local_deploy):
    root, _ = local_deploy
    commands = [c.replace("<root>", str(root)) for c in readme_commands()]
    assert commands[0] == f"module use {root}/current/modulefiles/Core"
    rc, env, err = lmod(" && ".join(commands), module_path=None)
    assert rc == 0, err
    assert "Lmod has detected" not in err and "cannot be loaded" not in err, err
    assert "openifs-env/0.0.3" in env["LOADEDMODULES"].split(":")


@pytest.mark.parametrize("module", meta_module_versions())
def test_every_version_loads_on_the_deployed_hierarchy(lmod, module):
    """Each version loads on the deployed tree with no other module loaded first, and does
    there what it says: openifs-env loads its FDB through its MPI (fdb is under
    openmpi/<version>/Core), as the release's etc/lmod/hierarchy.lua says; iostack finds no
    compiler level on `local` (its gcc 12 is core) and changes nothing."""
    name = module.split("/")[0]
    if name == "openifs-env":
        rc, env, err = lmod(f"module load {module} && fdb-info --version >&2 || true")
        assert rc == 0 and "cannot be loaded" not in err, err
        loaded = env["LOADEDMODULES"].split(":")
        assert module in loaded
        if env["IOSTACK_OIFS_OUTPUT"] == "fdb":
            assert "openmpi/4.1.4" in loaded and "fdb/5.13.106" in loaded
            # the release's FDB, not Debian's 5.10.8 in /usr/bin
            assert err.strip() == "5.13.106"
            assert "/opt/fdb-5.13.106-" in env["FDB_ROOT"]
        else:
            assert env["IOSTACK_OIFS_OUTPUT"] == "grib"
            assert not any(m.startswith("fdb/") for m in loaded) and "FDB_ROOT" not in env
    elif name == "iostack":
        rc, before, err = lmod("true")
        assert (rc, err) == (0, "")
        rc, env, err = lmod(f"module load {module}")
        assert (rc, err) == (0, "")
        assert env["LOADEDMODULES"] == module
        assert env["MODULEPATH"] == before["MODULEPATH"]
        assert "IOSTACK_COMPILER_LEVEL" not in env
        assert not [k for k in env if k.startswith("LMOD_CUSTOM_COMPILER_")]
        # and it goes as it came
        rc, env, err = lmod(f"module load {module} && module unload {module}")
        assert (rc, err) == (0, "")
        assert env.get("LOADEDMODULES", "") == ""
        assert env["MODULEPATH"] == before["MODULEPATH"]
    elif name == "darshan-profile":
        # a real program profiled by the release's Darshan: a serial one (DARSHAN_ENABLE_
        # NONMPI) writes 3 blocks of 4 KiB, and darshan-parser reads exactly that back
        rc, env, err = lmod(
            f"export LD_PRELOAD= && module load {module} && DARSHAN_ENABLE_NONMPI=1 "
            "DARSHAN_LOGFILE=$PWD/dd.darshan dd if=/dev/zero of=data bs=4096 count=3 "
            "status=none && darshan-parser --total dd.darshan >&2")
        assert rc == 0, err
        totals = dict(re.findall(r"^total_(POSIX_\w+): (\S+)$", err, re.M))
        assert totals["POSIX_BYTES_WRITTEN"] == "12288", err
        # dd opens its output and dup2()s it onto stdout; Darshan's OPENS counts both
        # (darshan-parser: "POSIX_OPENS counter includes both POSIX_FILENOS and POSIX_DUPS")
        assert (totals["POSIX_OPENS"], totals["POSIX_DUPS"]) == ("2", "1"), err
        (lib,) = [x for x in env["LD_PRELOAD"].split(":") if x]
        assert lib.startswith(env["DARSHAN_RUNTIME_ROOT"]) and lib.endswith("/libdarshan.so")
        assert env["DARSHAN_LOG_DIR_PATH"] == env["HOME"]
        # unloading takes away its library and nothing of the user's
        rc, env, err = lmod(f"export LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libc.so.6 "
                            f"DARSHAN_LOG_DIR_PATH=/var/tmp && module load {module} && "
                            f"module unload {module}")
        assert (rc, err) == (0, "")
        assert env["LD_PRELOAD"] == "/usr/lib/x86_64-linux-gnu/libc.so.6"
        assert env["DARSHAN_LOG_DIR_PATH"] == "/var/tmp"
        assert "IOSTACK_DARSHAN_PRELOAD" not in env and env.get("LOADEDMODULES", "") == ""
    else:
        pytest.fail(f"{module}: say here what it does on the deployed local tree")


def test_default_version_is_marked_and_loaded(lmod, tree):
    rc, _, err = lmod("module avail openifs-env 2>&1 | tee /dev/stderr >/dev/null")
    assert rc == 0
    assert "openifs-env/0.0.2 (D)" in err.replace("  ", " ")
    rc, env, err = lmod("module load openifs-env")
    assert (rc, err) == (0, "")
    assert "openifs-env/0.0.2" in env["LOADEDMODULES"].split(":")
    assert env["LMOD_FAMILY_OPENIFS_ENV"] == "openifs-env"
    assert env["IOSTACK_OIFS_OUTPUT"] == "fdb"
    release = tree.resolve().parents[1]
    assert env["FDB5_CONFIG_FILE"] == str(tree.parents[1] / "etc" / "fdb5" / "config.yaml")
    assert (release / deploy.MODULE_CHAINS).is_file()
    assert "FDB_ASYNC_WRITE" not in env


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
    # depends_on, not load: openmpi and fdb (and what they load, eccodes too) were the user's
    rc, before, err = lmod("module load openmpi fdb")
    assert (rc, err) == (0, "")
    rc, env, err = lmod("module load openmpi fdb && module load openifs-env && "
                        "module unload openifs-env")
    assert (rc, err) == (0, "")
    assert env["LOADEDMODULES"] == before["LOADEDMODULES"]
    assert {"openmpi/4.1.4", "fdb/5.13.106"} <= set(env["LOADEDMODULES"].split(":"))
    assert "LMOD_FAMILY_OPENIFS_ENV" not in env
    # and what it brought itself goes with it
    rc, env, err = lmod("module load openifs-env && module unload openifs-env")
    assert (rc, err) == (0, "")
    assert env.get("LOADEDMODULES", "") == ""


def test_family_replaces_rather_than_stacks(lmod):
    rc, env, err = lmod("module load openifs-env/0.0.3 && module load openifs-env/0.0.1")
    assert rc == 0, err
    assert [m for m in env["LOADEDMODULES"].split(":") if m.startswith("openifs-env")] == \
        ["openifs-env/0.0.1"]
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


@pytest.fixture
def tree_copy(tree, tmp_path):
    """A copy of the deployed release's modulefiles and etc/ to break."""
    release = tree.resolve().parents[1]
    copy = tmp_path / "release"
    shutil.copytree(release / "modulefiles", copy / "modulefiles", symlinks=True)
    shutil.copytree(release / "etc", copy / "etc", symlinks=True)
    return copy / "modulefiles" / "Core"


def test_a_missing_dependency_is_an_error(lmod, tree_copy):
    """The release's table names an FDB module its tree has not: removed from the tree.
    Renaming it in the table would not do: MultIO's Spack module, which openifs-env loads
    next, loads the lock's fdb itself, and Lmod 8.7 checks a failed depends_on by name only
    (fdb is loaded: a warning, exit 0)."""
    release = tree_copy.parents[1]
    chains = release / deploy.MODULE_CHAINS
    assert '"fdb/5.13.106"' in chains.read_text()
    # the copy's MPI modules open the copy's MPI level, not the deployed tree's
    openmpi = [f for f in (tree_copy / "openmpi").iterdir() if f.suffix == ".lua"]
    for module in openmpi:
        text = module.read_text()
        prefixes = re.findall(r'prepend_path\("MODULEPATH",\s*"([^"]+)/modulefiles/', text)
        assert prefixes, text
        for prefix in set(prefixes):
            text = text.replace(f"{prefix}/modulefiles/", f"{release}/modulefiles/")
        module.write_text(text)
    (fdb,) = release.glob("modulefiles/openmpi/*/Core/fdb/5.13.106.lua")
    fdb.unlink()
    rc, _, err = lmod("module load openifs-env", module_path=tree_copy)
    assert rc != 0
    assert "fdb/5.13.106" in err


def test_a_version_without_settings_is_refused(lmod, tree_copy):
    (tree_copy / "openifs-env" / "9.9.9.lua").symlink_to(".openifs-env.lua")
    rc, _, err = lmod("module load openifs-env/9.9.9", module_path=tree_copy)
    assert rc != 0
    assert "no settings for version 9.9.9" in words(err)


@pytest.mark.parametrize("module", meta_module_versions())
def test_every_meta_module_follows_newer_lmod_rules(lmod, module):
    """What each version does, as Lmod shows it: family names Lmod 8.7 accepts, variables
    a shell can export, and other modules pulled in with depends_on (Lmod's "Dependent
    Modules": load() would unload them on unload even if the user had loaded them)."""
    rc, _, shown = lmod(f"module show {module} 2>&1 | tee /dev/stderr >/dev/null")
    assert rc == 0 and "Lmod has detected" not in shown, shown
    calls = lmodtool.SHOWN_CALL.findall(shown)
    assert calls, shown
    for name, arg in calls:
        if name in ("family", "add_property", "remove_property"):
            assert lmodtool.LMOD_NAME.match(arg), f"{module}: {name}({arg!r}) is refused by Lmod 8.7"
        if name in ("setenv", "pushenv", "prepend_path", "append_path", "unsetenv"):
            assert lmodtool.LMOD_NAME.match(arg), f"{module}: {name}({arg!r}) is no shell variable"
        assert name not in ("load", "always_load", "try_load"), \
            f"{module}: {name}({arg!r}): a meta-module depends_on() what it needs"
    assert any(n == "whatis" and a.startswith("Description: ") for n, a in calls)
