"""A site described once, generated into every tree (iostack.site.generate): what is
committed is what the facts give, a hand edit or a missed regeneration is named, and a site
name that would shadow a module is refused."""
import shutil

import pytest
import yaml

from iostack.core import paths
from iostack.site import facts as site_facts
from iostack.site import generate


@pytest.mark.parametrize("site", site_facts.names())
def test_what_is_committed_is_what_the_facts_give(site):
    assert [g.shown for g in generate.stale(site)] == []


def test_no_generated_file_outlives_its_site():
    assert generate.orphans() == []


@pytest.fixture
def copy(monkeypatch, tmp_path):
    """The facts and the generated trees, copied, with every path pointing there."""
    shutil.copytree(paths.REPO / "sites", tmp_path / "sites")
    shutil.copy(paths.REPO / "pins.json", tmp_path)        # what makes it a repository
    monkeypatch.setattr(paths, "SPACK_ENV_SITES", tmp_path / "spack-env" / "sites")
    monkeypatch.setattr(paths, "ANSIBLE_INVENTORIES", tmp_path / "ansible" / "inventories")
    shutil.copytree(paths.REFRAME_DIR / "config", tmp_path / "reframe-tests" / "config",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for tree in ("spack-env/sites", "ansible/inventories"):
        shutil.copytree(paths.REPO / tree, tmp_path / tree, symlinks=True,
                        ignore=shutil.ignore_patterns(".spack-env"))
    monkeypatch.setattr(paths, "REPO", tmp_path)
    monkeypatch.setattr(paths, "REFRAME_DIR", tmp_path / "reframe-tests")
    monkeypatch.setattr(site_facts, "FACTS", tmp_path / "sites")
    site_facts.load.cache_clear()
    yield tmp_path
    site_facts.load.cache_clear()


def test_a_hand_edit_and_a_new_system_are_named_until_generated(copy, iostack):
    config = copy / "reframe-tests" / "config" / "local.py"
    config.write_text(config.read_text() + "site_configuration['systems'] = []\n")
    facts = yaml.safe_load((copy / "sites" / "cray-ex.yaml").read_text())
    facts["systems"] = ["cray-ex", "cray-ex-gpu"]
    (copy / "sites" / "cray-ex.yaml").write_text(yaml.safe_dump(facts))
    site_facts.load.cache_clear()
    p = iostack("site", "generate", "--check")
    assert p.returncode == 1
    assert p.stdout.splitlines() == [
        "iostack: reframe-tests/config/cray-ex.py differs from what its facts give: bin/iostack "
        "site generate, and commit it",
        "iostack: reframe-tests/config/local.py differs from what its facts give: bin/iostack "
        "site generate, and commit it"]
    assert iostack("site", "generate").returncode == 0
    assert "cray-ex-gpu" in (copy / "reframe-tests" / "config" / "cray-ex.py").read_text()
    assert iostack("site", "generate", "--check").returncode == 0


def test_a_site_named_like_a_module_is_refused_in_one_line(copy):
    facts = yaml.safe_load((copy / "sites" / "local.yaml").read_text())
    facts["name"] = "json"
    (copy / "sites" / "json.yaml").write_text(yaml.safe_dump(facts))
    with pytest.raises(generate.GenerateError) as e:
        generate.reframe_config("json")
    assert str(e.value) == ("site 'json': reframe-tests/config/json.py would shadow the Python "
                            "module 'json' while ReFrame loads it; choose another name")


def test_a_new_cpe_release_in_the_facts_reaches_the_spack_site_and_the_inventory(copy, iostack):
    """The Cray PE's versions are the facts': a new MPI and compiler in sites/cray-ex.yaml
    are named stale in packages.yaml and the inventory until generated, then they hold the
    new versions and nothing of the old."""
    facts = yaml.safe_load((copy / "sites" / "cray-ex.yaml").read_text())
    pe = facts["programming_environment"]
    pe["mpi"] = "cray-mpich@8.1.28"
    pe["prgenvs"]["PrgEnv-cray"]["compiler"] = "cce@17.0.0"
    (copy / "sites" / "cray-ex.yaml").write_text(yaml.safe_dump(facts))
    site_facts.load.cache_clear()
    assert [g.shown for g in generate.stale("cray-ex")] == [
        "spack-env/sites/cray-ex/packages.yaml",
        "spack-env/sites/cray-ex/spack.yaml",
        "ansible/inventories/cray-ex/group_vars/all/10-site.yml"]
    assert iostack("site", "generate", "cray-ex").returncode == 0
    packages = (copy / "spack-env" / "sites" / "cray-ex" / "packages.yaml").read_text()
    assert "cray-mpich@8.1.28 os=sles15 target=zen2 %cce@17.0.0" in packages
    assert "/opt/cray/pe/mpich/8.1.28/" in packages and "/opt/cray/pe/cce/17.0.0" in packages
    assert "8.1.27" not in packages and "16.0.1" not in packages
    inventory = (copy / "ansible" / "inventories" / "cray-ex" / "group_vars" / "all" /
                 "10-site.yml").read_text()
    assert "current/modulefiles/cce/17.0.0" in inventory
    toolchains = (copy / "spack-env" / "sites" / "cray-ex" / "spack.yaml").read_text()
    assert "'%fortran=cce@17.0.0'" in toolchains and "16.0.1" not in toolchains


def test_a_template_that_names_no_fact_is_one_line(copy):
    template = copy / "ansible" / "inventories" / "cray-ex" / "hosts.yml.in"
    template.write_text(template.read_text() + "# [[ facts.nodes['gpu'].hosts[0] ]]\n")
    with pytest.raises(generate.GenerateError) as e:
        generate.generated("cray-ex")
    assert str(e.value).startswith("ansible/inventories/cray-ex/hosts.yml.in: ")
    assert "\n" not in str(e.value)
