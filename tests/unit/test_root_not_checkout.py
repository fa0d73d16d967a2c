"""A deployment root is never a checkout: Spack works in <root>/spack-env, which each command
refreshes from the checkout's spack-env/ by removing what was there first, so `--root`
pointed at a checkout (another one, or this one) would wipe that checkout's environments."""
import shutil
import sys

import pytest

from iostack.core.settings import Settings
from iostack.core import digest, paths
from iostack.core.errors import IostackError
from iostack.site.target import SpackEnv
from iostack.spack import runner


@pytest.fixture
def victim(tmp_path):
    """Another checkout of the repository (what makes a directory one: pins.json, sites/,
    spack-env/), with an environment of its own that this checkout does not have."""
    top = tmp_path / "other-checkout"
    for tree in ("sites", "spack-env"):
        shutil.copytree(paths.REPO / tree, top / tree)
    shutil.copy2(paths.REPO / "pins.json", top)
    (top / "spack-env" / "sites" / "theirs").mkdir()
    (top / "spack-env" / "sites" / "theirs" / "spack.yaml").write_text("spack: {specs: [zlib]}\n")
    return top


def test_refreshing_the_environment_refuses_a_root_at_a_checkout(victim):
    before = digest.tree_sha256(victim)
    try:
        runner.deployed_env(SpackEnv("local"), victim)
        refused = None
    except IostackError as e:
        refused = str(e)
    # what the attack would do first: their own environment gone, this checkout's in its place
    assert (victim / "spack-env" / "sites" / "theirs" / "spack.yaml").is_file()
    assert digest.tree_sha256(victim) == before
    assert refused and refused.startswith(f"deployment root {victim} is the iostack checkout {victim}")


def test_deploy_at_a_checkout_is_one_line_and_writes_nothing(victim, iostack):
    before = digest.tree_sha256(victim)
    p = iostack("deploy", "--site", "local", "--root", victim, "--skip-regression",
                env={"IOSTACK_ROOT": "", "IOSTACK_VENV": sys.prefix})
    assert p.returncode != 0
    assert p.stderr.splitlines() == [
        f"iostack: error: deployment root {victim} is the iostack checkout {victim}, whose "
        f"spack-env/ a deployment's would replace: choose a root outside it (or under "
        f"{victim / 'deploy'})"]
    assert digest.tree_sha256(victim) == before        # no releases/, nothing replaced


def test_this_checkout_and_its_trees_are_refused_but_its_deploy_directory_is_not():
    for root in (paths.REPO, paths.REPO / "spack-env", paths.REPO / "lib"):
        with pytest.raises(IostackError, match="the iostack checkout"):
            paths.check_root(root)
    inside = Settings.from_environ({"IOSTACK_ROOT": str(paths.REPO / "spack-env" / "sites")})
    with pytest.raises(IostackError, match="is inside the iostack checkout"):
        inside.deploy_root("local")
    assert Settings.from_environ({}).deploy_root("local") == paths.REPO / "deploy" / "local"
    assert paths.check_root(paths.REPO / "deploy" / "elsewhere") == paths.REPO / "deploy" / "elsewhere"
