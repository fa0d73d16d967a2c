"""deploy.names_the_lock_leaves_open: a deploy from a build cache refuses a spack.yaml whose
specs name packages its spack.lock's roots do not (or the other way round) before Spack's
solve, which takes minutes, finds it; and leaves to Spack what it cannot read plainly."""
import shutil

import pytest

from iostack.core import paths
from iostack.deployment import deploy


@pytest.fixture
def local_env(tmp_path):
    """A copy of spack-env/ (the site's manifest includes ../../templates)."""
    shutil.copytree(paths.REPO / "spack-env", tmp_path / "spack-env")
    return tmp_path / "spack-env" / "sites" / "local"


def test_the_committed_local_environments_are_covered_by_their_locks():
    for env in ("local", "local/nwp"):
        assert deploy.names_the_lock_leaves_open(paths.SPACK_ENV_SITES / env) == set()


def test_a_spec_added_to_the_manifest_is_named(local_env):
    manifest = local_env / "spack.yaml"
    manifest.write_text(manifest.read_text().replace("  - nvme-stage\n",
                                                     "  - nvme-stage\n  - ecbuild@3.8\n"))
    assert deploy.names_the_lock_leaves_open(local_env) == {"ecbuild"}


def test_a_spec_removed_from_a_definition_is_named(local_env):
    template = local_env.parents[1] / "templates" / "io.yaml"
    text = template.read_text()
    assert "[ior, io500, netcdf-output-bench]" in text
    template.write_text(text.replace("[ior, io500, netcdf-output-bench]", "[ior, io500]"))
    assert deploy.names_the_lock_leaves_open(local_env) == {"netcdf-output-bench"}


@pytest.mark.parametrize("specs", [
    "  - matrix:\n    - [fdb]\n    - ['%gcc']\n",      # a matrix
    "  - $no_such_definition\n",                       # an undefined name
    "  - ^zlib\n",                                     # no package named first
])
def test_what_only_spack_can_judge_is_left_to_it(local_env, specs):
    manifest = local_env / "spack.yaml"
    manifest.write_text(manifest.read_text().replace("  - nvme-stage\n", "  - nvme-stage\n" + specs))
    assert deploy.names_the_lock_leaves_open(local_env) is None


def test_an_unreadable_lock_is_left_to_spack(local_env):
    (local_env / "spack.lock").write_text("{not json")
    assert deploy.names_the_lock_leaves_open(local_env) is None
