"""A site's other Spack environments (spack-env/sites/<site>/<env>/, as Stackinator's
environments.yaml gives a recipe several): found by name, reading the site's one
packages.yaml, and refused with one line when a site has no such environment."""

import pytest
import yaml

from iostack.core import paths
from iostack.site import facts as sites
from iostack.site.target import SpackEnv


def test_local_has_the_nwp_environment_and_every_lock_names_it():
    assert sites.spack_envs("local") == ["nwp"]
    assert sites.spack_env("local", None) == SpackEnv("local")
    assert sites.spack_env("local", "nwp") == SpackEnv("local", "nwp")
    assert sites.check_spack_env("local/nwp").name == "local/nwp"
    assert SpackEnv("local", "nwp") in sites.all_spack_envs()
    assert {SpackEnv(s) for s in sites.spack_sites()} <= set(sites.all_spack_envs())
    # a site and its environment are different types: neither passes for the other
    assert SpackEnv("local") != "local" and SpackEnv("local", "nwp").site == "local"
    # a site is described once: the environment includes the site's own files
    spec = yaml.safe_load((paths.SPACK_ENV_SITES / "local" / "nwp" / "spack.yaml").read_text())
    assert {"../packages.yaml", "../modules.yaml"} <= set(spec["spack"]["include"])
    assert not (paths.SPACK_ENV_SITES / "local" / "nwp" / "packages.yaml").exists()


def test_the_nwp_environment_is_the_site_stack_plus_openifs():
    default = yaml.safe_load((paths.SPACK_ENV_SITES / "local" / "spack.yaml").read_text())
    nwp = yaml.safe_load((paths.SPACK_ENV_SITES / "local" / "nwp" / "spack.yaml").read_text())
    assert set(default["spack"]["specs"]) <= set(nwp["spack"]["specs"])
    assert set(nwp["spack"]["specs"]) - set(default["spack"]["specs"]) == {"$nwp_model",
                                                                            "$nwp_bundle"}


def test_unknown_environment_is_one_line_and_nothing_runs(iostack):
    p = iostack("deploy", "--site", "local", "--env", "atlantis",
                env={"IOSTACK_ROOT": "/nonexistent/iostack-root"})
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "iostack: error: site local has no environment 'atlantis'; its environments: nwp"]
    assert "+ " not in p.stdout


def test_unknown_environment_in_a_lock_name():
    with pytest.raises(sites.FactsError, match="site cray-ex has no environment 'nwp'"):
        sites.check_spack_env("cray-ex/nwp")
