"""A release's user's guide as a user sees it: the page deploy writes (guide.py) for a release
made from the committed local lock, with its Spack scope (upstream.py) beside it, opened in
headless Chromium (Debian's). Checked in what the browser rendered: the sections the page
links to exist, fdb's row says which modules load it, the change from the release before is
shown, the scope's README it links to is there, and nothing is wider than the window."""
import shutil

import pytest
from headless_chromium import Chromium, executable
from support.guide_release import a_deployment

from iostack.core import paths
from iostack.deployment import guide, upstream

pytestmark = pytest.mark.skipif(executable() is None, reason="chromium not installed (apt: chromium)")


def test_the_guide_renders_its_sections_modules_changes_and_links(tmp_path):
    root, old, new = a_deployment(tmp_path)
    site = new.path / "spack-env" / "sites" / "local"
    site.mkdir(parents=True)
    shutil.copy(paths.REPO / "spack-env" / "sites" / "local" / "packages.yaml", site)
    upstream.write(new.path, root, "local")
    page = guide.write(root, new, ("gcc@12.2.0",))
    with Chromium(tmp_path / "profile") as browser:
        browser.open(page.as_uri())
        seen = browser.evaluate("""(() => {
          const text = e => e.innerText.trim();
          const rows = sel => [...document.querySelectorAll(sel)].map(r =>
              [...r.cells].map(text));
          const section = id => document.getElementById(id);
          return {
            title: document.title,
            headings: [...document.querySelectorAll('h2')].map(text),
            nav: [...document.querySelectorAll('nav a')].map(a =>
                [a.getAttribute('href'), !!section(a.getAttribute('href').slice(1))]),
            fdb: rows('#modules ~ table tr').find(r => r[0] === 'fdb'),
            changes: rows('tr.removed, tr.added, tr.upgraded, tr.rebuilt'),
            readme: [...document.querySelectorAll('a')].map(a => a.href)
                .filter(h => h.endsWith('README.md')),
            wide: document.documentElement.scrollWidth > window.innerWidth,
          };
        })()""")
        browser.screenshot(tmp_path / "guide.png")
    assert seen["title"] == f"iostack release {new.id}: user's guide"
    assert seen["headings"] == ["Modules", "Building against the release",
                                "Scratch and file systems", "Changes", "Every package"]
    assert seen["nav"] == [[f"#{s}", True] for s in
                           ("modules", "build", "storage", "changes", "packages")]
    assert seen["fdb"] == ["fdb", "5.13.106", "module load openmpi/4.1.4 fdb/5.13.106",
                           "eckit/1.28.8, metkit/1.11.22"]
    assert seen["changes"] == [["removed", "nvme-stage", "1.1.0", "", ""]]
    (readme,) = seen["readme"]
    assert readme == (upstream.scope_dir(new.path) / "README.md").as_uri()
    assert (upstream.scope_dir(new.path) / "README.md").is_file()
    assert not seen["wide"]
