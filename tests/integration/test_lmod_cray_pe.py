"""The module paths a cray-ex user gets, under real Lmod: stand-ins of HPE's PE modules
(tests/support/cray_pe.py: PrgEnv-cray/-gnu, cce, gcc, cray-mpich, cray-libsci, cpe, craype
and the target modules, doing what HPE's do), the release tree a deploy makes (Spack's levels
for the cray-ex lock: the GNU builds in Core, the CCE builds in cce/16.0.1;
tests/spack/test_spack_sites.py checks that Spack lays them out so), the meta-modules deploy
copies in (modulefiles/iostack) and the profile script the lmod role writes with cray-ex's
inventory."""
from __future__ import annotations

import json
import pathlib
import subprocess

import pytest
import yaml

from ansible_helpers import ANSIBLE_DIR, run_role
from iostack.core import paths
from iostack.deployment import deploy
from iostack.site import facts as site_facts
from support import cray_pe
from support import rfm_config
from unit.spack_lock import Lock

LMOD_INIT = pathlib.Path("/usr/share/lmod/lmod/init/bash")
pytestmark = pytest.mark.skipif(not LMOD_INIT.exists(), reason="Lmod not installed (apt: lmod)")

FACTS = site_facts.load("cray-ex")
PE = FACTS.programming_environment
# CPE releases of the stand-in PE: the facts' one and the one before it [ARCHER2-DevEnv]
RELEASES = {
    "22.12": {"PrgEnv": "8.3.3", "cce": "15.0.0", "gcc": "11.2.0", "cray-mpich": "8.1.23",
              "cray-libsci": "22.12.1.1"},
    "23.09": {"PrgEnv": "8.4.0", "cce": "16.0.1", "gcc": "11.2.0", "cray-mpich": "8.1.27",
              "cray-libsci": "23.09.1.1"},
}


def write(path: pathlib.Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def stand_in_pe(pe: pathlib.Path) -> pathlib.Path:
    """HPE's PE modules as stand-ins; returns its core module directory."""
    return cray_pe.write(pe, "cray-ex", RELEASES).core


def stack_tree(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """A release of the cray-ex stack as deploy leaves it: one module per package of the
    lock at its compiler's level (Core for the core compiler), the meta-modules, `current`."""
    lock = Lock.of("cray-ex")
    lmod = yaml.safe_load((paths.SPACK_ENV_SITES / "cray-ex" / "modules.yaml").read_text())
    (core_compiler,) = lmod["modules"]["default"]["lmod"]["core_compilers"]
    release = root / "releases" / "r1"
    levels = {}
    for spec in lock.specs.values():
        compiler = lock.compiler(spec)
        if spec.get("external") or compiler is None:
            continue
        level = "Core" if compiler == core_compiler else compiler.replace("@", "/")
        levels[compiler] = release / "modulefiles" / level
        write(release / "modulefiles" / level / spec["name"] / f"{spec['version']}.lua",
              f'setenv("{spec["name"].upper().replace("-", "_")}_ROOT", '
              f'"/opt/iostack/{compiler}/{spec["name"]}")\n')
    deploy.install_meta_modules(release)
    (root / "current").symlink_to(release.relative_to(root))
    return levels


@pytest.fixture(scope="module")
def site(tmp_path_factory, venv_bin):
    tmp = tmp_path_factory.mktemp("craype")
    pe_core = stand_in_pe(tmp / "pe")
    root = tmp / "iostack"
    levels = stack_tree(root)
    # the login script the lmod role writes with cray-ex's inventory
    inventory = yaml.safe_load(
        (ANSIBLE_DIR / "inventories/cray-ex/group_vars/all/10-site.yml").read_text())
    custom = {k: v.replace("{{ iostack_root }}", str(root))
              for k, v in inventory["lmod_custom_compiler_paths"].items()}
    run = run_role(venv_bin, "lmod", {
        "iostack_root": str(root), "lmod_install": inventory["lmod_install"],
        "lmod_profile_script": str(tmp / "profile.d" / "iostack-modules.sh"),
        "lmod_rc_file": str(tmp / "lmod" / "iostack-lmodrc.lua"),
        "lmod_custom_compiler_paths": custom}, tmp)
    assert run.rc == 0, run.explain()
    return {"pe": pe_core, "root": root, "levels": levels,
            "profile": tmp / "profile.d" / "iostack-modules.sh"}


def lmod(site, script: str, profile: bool) -> tuple[dict, str]:
    """A clean bash with the PE's modules on MODULEPATH (and the login script when
    `profile`), running `script`; (environment at the end, stderr)."""
    full = (f". {LMOD_INIT} && export MODULEPATH={site['pe']} && "
            + (f". {site['profile']} && " if profile else "") + script
            + " && python3 -c 'import json,os; print(json.dumps(dict(os.environ)))'")
    p = subprocess.run(["bash", "--noprofile", "--norc", "-c", full], capture_output=True,
                       text=True, env=cray_pe.clean_environment(), timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def stack_paths(site, env) -> list[str]:
    """The stack's directories on MODULEPATH, in order, as the user sees them."""
    return [d for d in env["MODULEPATH"].split(":") if d.startswith(str(site["root"]))]


def test_the_login_script_names_the_cce_level_for_hpes_compiler_module(site):
    text = site["profile"].read_text()
    assert "LMOD_CUSTOM_COMPILER_CRAYCLANG_14_0_PREFIX" in text
    env, _ = lmod(site, "true", profile=True)
    cce = f"{site['root']}/current/modulefiles/cce/16.0.1"
    assert env["LMOD_CUSTOM_COMPILER_CRAYCLANG_14_0_PREFIX"] == cce
    assert stack_paths(site, env) == [f"{site['root']}/current/modulefiles/Core"]


@pytest.mark.parametrize("profile", [True, False], ids=["login script", "no login script"])
def test_prgenv_cray_and_the_stack_give_the_cce_level_before_core(site, profile):
    """As a user logs in (PrgEnv-cray is ARCHER2's default) and loads the stack: the CCE
    builds come first, then Core; FDB is CCE's build. Without the login script (a batch job
    that does not source it) `module use` of Core and the iostack module do the same."""
    root = site["root"]
    use = "" if profile else f"module use {root}/current/modulefiles/Core && "
    env, err = lmod(site, use + f"module load cpe/{PE['release']} PrgEnv-cray iostack fdb fio",
                    profile)
    assert err == ""
    assert stack_paths(site, env) == [f"{root}/current/modulefiles/cce/16.0.1",
                                      f"{root}/current/modulefiles/Core"]
    assert env["LMOD_FAMILY_COMPILER"] == "cce" and env["LMOD_FAMILY_COMPILER_VERSION"] == "16.0.1"
    assert env["FDB_ROOT"] == "/opt/iostack/cce@16.0.1/fdb"
    assert env["FIO_ROOT"] == "/opt/iostack/gcc@11.2.0/fio"       # only built with GNU
    assert env["CRAY_MPICH_DIR"] == "/opt/cray/pe/mpich/8.1.27/ofi/crayclang/14.0"


@pytest.mark.parametrize("profile", [True, False], ids=["login script", "no login script"])
def test_swapping_to_prgenv_gnu_takes_the_cce_level_away(site, profile):
    """HPE's cce module, unloaded, removes the level it added (the login script's variable
    or the iostack module's); Lmod reloads FDB from what is left: the GNU build."""
    root = site["root"]
    use = "" if profile else f"module use {root}/current/modulefiles/Core && "
    env, err = lmod(site, use + "module load PrgEnv-cray iostack fdb && module load PrgEnv-gnu",
                    profile)
    assert stack_paths(site, env) == [f"{root}/current/modulefiles/Core"]
    assert env["FDB_ROOT"] == "/opt/iostack/gcc@11.2.0/fdb"
    assert env["LMOD_FAMILY_COMPILER"] == "gcc"
    assert "fdb" in err and "reloaded" in err            # Lmod says it reloaded it
    # and back: the cce level returns with PrgEnv-cray
    env, _ = lmod(site, use + "module load PrgEnv-cray iostack fdb && module load PrgEnv-gnu "
                  "&& module load PrgEnv-cray", profile)
    assert stack_paths(site, env)[0] == f"{root}/current/modulefiles/cce/16.0.1"
    assert env["FDB_ROOT"] == "/opt/iostack/cce@16.0.1/fdb"


def test_the_reframe_environments_load_as_written(site, monkeypatch, tmp_path):
    """cray-ex's ReFrame environments (reframe-tests/config/cray-ex.py), module by module,
    in a batch shell (no login script): each loads, with its compiler's builds of ecCodes
    and FDB."""
    config = rfm_config.load("cray-ex", tmp_path)
    envs = {e["name"]: e for e in config["environments"] if "cray-ex" in e["target_systems"]}
    assert set(envs) == set(PE["prgenvs"])
    for name, e in envs.items():
        compiler = PE["prgenvs"][name]["compiler"]
        env, err = lmod(site, f"module use {site['root']}/current/modulefiles/Core && "
                        f"module load {' '.join(e['modules'])}", profile=False)
        assert err == "", (name, err)
        assert env["FDB_ROOT"] == f"/opt/iostack/{compiler}/fdb"
        assert env["ECCODES_ROOT"] == f"/opt/iostack/{compiler}/eccodes"
        assert env["CRAY_PE_RELEASE"] == PE["release"]
