"""With real Spack: every site's committed spack.lock, and that of each other environment of
a site (local/nwp, with OpenIFS), is what a fresh concretization gives (side by side),
whichever way Spack was obtained (clone or release tarball)."""
import pytest

from iostack.site import facts
from iostack.spack import locks
from support import targets


@pytest.fixture(scope="module")
def fresh(timings):
    results = locks.fresh_locks(targets.settings(), facts.all_spack_envs())
    for site, result in results.items():
        if not isinstance(result, Exception):
            timings[f"concretize {site} (side by side)"] = result[1]
    return results


@pytest.mark.parametrize("site", facts.all_spack_envs(), ids=str)
def test_site_lock_is_fresh(fresh, site):
    result = fresh[site]
    assert not isinstance(result, Exception), str(result)
    lock, _ = result
    assert locks.differences(locks.committed_lock(site), lock) == []
