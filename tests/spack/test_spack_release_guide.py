"""The user's guide the real deploy of `local` wrote (guide.py), opened in headless Chromium:
each package the lock roots has its row, fdb loaded through its MPI with the autoloads of
the module file Spack wrote, the release's Spack scope, and every built package's prefix
in the install tree."""
import json

import pytest
from integration.headless_chromium import Chromium, executable

from iostack.deployment import guide, releases, upstream


@pytest.mark.skipif(executable() is None, reason="chromium not installed (apt: chromium)")
def test_the_deployed_release_has_its_users_guide(local_deploy, tmp_path):
    root, _ = local_deploy
    release = releases.find(root, releases.current(root))
    page = release.path / guide.GUIDE
    assert page.is_file()
    with Chromium(tmp_path / "profile") as browser:
        browser.open(page.as_uri())
        rows = browser.evaluate("""[...document.querySelectorAll('table')[0].rows].slice(1)
            .map(r => [...r.cells].map(c => c.innerText.trim()))""")
        text = browser.evaluate("document.body.innerText")
    by_name = {r[0]: r for r in rows}
    lock = json.loads((release.path / releases.LOCK).read_text())
    assert set(by_name) == {lock["concrete_specs"][r["hash"]]["name"] for r in lock["roots"]}
    fdb = by_name["fdb"]
    assert fdb[1:3] == ["5.13.106", "module load openmpi/4.1.4 fdb/5.13.106"]
    assert "eckit/1.28.8" in fdb[3] and "metkit/1.11.22" in fdb[3]
    assert f"spack -C {upstream.scope_dir(release.path)} install my-model" in text
    previous = guide.previous_release(root, release)
    assert (f"Since {previous.id}: " if previous else "The first release of this deployment.") in text
    for prefix in (root / "opt").glob("fdb-5.13.106-*"):
        assert str(prefix) in text
