"""The report page as a person sees it: five nights that real ReFrame runs stored, on three
releases (the tiny checks of tests/data/reframe/report_checks.py print each night's values;
tests/support/reframe_runs.py), `bin/iostack report`'s page opened in headless Chromium
(Debian's), with what the browser rendered checked: every chart image decoded, each test
case's latest verdict with its reference band, ReFrame's comparison of the last night with
the ones before, and each point's release and lock, its point in the chart linking to the
release. A screenshot of the page is written too."""
import json
import pathlib
import shutil
import statistics

import pytest
from headless_chromium import Chromium, executable
from support.reframe_runs import REPORT_CHECKS, run_checks, values

from iostack.deployment import releases
from iostack.regression import report
from iostack.site.target import SpackEnv
from support import targets

pytestmark = [
    pytest.mark.skipif(executable() is None, reason="chromium not installed (apt: chromium)"),
    pytest.mark.skipif(not (targets.settings().venv / "bin" / "reframe").exists(),
                       reason="ReFrame not installed (bin/iostack setup)")]

# (release index, fdb_write_bw, fdb_write_ratio) of each night: release 1 failed its regression
DAYS = [(0, 205.0, 0.31), (0, 199.0, 0.30), (1, 150.0, 0.12), (2, 201.0, 0.33), (2, 210.0, 0.29)]
BW_BAND = "180 to 220 MiB/s"        # 200, -10 %, +10 % (tests/data/reframe/references)
RATIO_BAND = "at least 0.15 ratio"  # 0.3, -50 %, open above
THROUGHPUT = "TinyThroughputCheck %size=small"


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    """A deployment with three releases (the middle one failed) and five nightly sessions on
    them, each run as `bin/iostack nightly` runs one: on the current release, with its
    session extras; TinySmokeCheck ran only in the first."""
    tmp_path = tmp_path_factory.mktemp("report")
    root = tmp_path / "root"
    lock = tmp_path / "spack.lock"
    ids = []
    for i, verdict in enumerate([releases.PASSED, releases.FAILED, releases.PASSED]):
        lock.write_text(json.dumps({"roots": [], "n": i}))
        r = releases.create(root, SpackEnv("local"), f"c0mm1t{i}", lock)
        releases.record(r, regression=verdict)
        (r.modulefiles / "Core").mkdir(parents=True)
        ids.append(r.id)
    for day, (rel, bw, ratio) in enumerate(DAYS):
        releases.switch(root, ids[rel], force=True)
        tree = releases.tree_under_test(root)
        commit = releases.load(tree).meta["commit"]
        run_checks(tmp_path, REPORT_CHECKS,
                   ["-n", "TinyThroughputCheck" + ("|TinySmokeCheck" if day == 0 else ""),
                    *values(bw=bw, ratio=ratio), "--session-extras", f"site=local,commit={commit}",
                    *releases.session_extras(tree)], name=f"night-{day}", root=root,
                   release=tree)
    out = root / "reframe" / "report"
    assert report.main(targets.of(root), out) == 0
    return root, ids, out / "index.html"


ROWS = """Array.from(document.querySelectorAll(SELECTOR)).map(
    tr => Array.from(tr.cells).map(td => td.innerText.trim()))"""


def rows(browser, selector):
    return browser.evaluate(ROWS.replace("SELECTOR", json.dumps(selector)))


def broken_images(browser):
    return browser.evaluate("Array.from(document.images).filter(i => !(i.complete && "
                            "i.naturalWidth > 0)).map(i => i.getAttribute('src'))")


def test_report_page_in_a_browser(deployment, tmp_path):
    root, ids, index = deployment
    pngs = sorted(p.name for p in index.parent.glob("*.png"))
    assert len(pngs) == 2
    with Chromium(tmp_path / "profile") as browser:
        browser.open(index.as_uri())
        # every chart image loads
        assert sorted(browser.evaluate("Array.from(document.images).map(i => i.getAttribute('src'))")) == pngs
        assert broken_images(browser) == []
        assert browser.evaluate("Math.min(...Array.from(document.images).map(i => i.naturalWidth))") >= 800

        # each test case's latest verdict, with its reference band, from its latest session
        latest = {r[0]: r for r in rows(browser, "table.latest tr:not(:first-child)")}
        assert sorted(latest) == ["TinySmokeCheck", THROUGHPUT]
        fdb = latest[THROUGHPUT]
        assert fdb[2] == "PASS" and fdb[4] == ids[2]
        assert f"fdb_write_bw = 210 MiB/s (reference: {BW_BAND})" in fdb[5]
        assert f"fdb_write_ratio = 0.29 ratio (reference: {RATIO_BAND})" in fdb[5]
        smoke = latest["TinySmokeCheck"]
        assert smoke[2] == "PASS" and smoke[4] == ids[0] and smoke[5] == "no performance variables"

        # the last night beside the median of the four before, as ReFrame compares them
        compared = {r[2]: r for r in rows(browser, "table.compare tr:not(:first-child)")}
        assert sorted(compared) == ["fdb_write_bw", "fdb_write_ratio"]
        for var, unit, column in (("fdb_write_bw", "MiB/s", 1), ("fdb_write_ratio", "ratio", 2)):
            earlier = statistics.median(day[column] for day in DAYS[:-1])
            last = DAYS[-1][column]
            assert compared[var][:5] == [THROUGHPUT, "local:default+builtin", var,
                                         f"{last:g} {unit}", f"{earlier:g} {unit} (of 4)"]
            assert compared[var][5] == f"{round(100 * (last - earlier) / earlier, 2):+g} %"

        # every point: its release and lock visible in the table under its chart
        shown = rows(browser, "div.points tr:not(:first-child)")
        assert len(shown) == 2 * len(DAYS)
        for day, (rel, bw, ratio) in enumerate(DAYS):
            meta = releases.find(root, ids[rel]).meta
            for value, unit in ((bw, "MiB/s"), (ratio, "ratio")):
                matching = [r for r in shown if r[2] == f"{value:.4g} {unit}"
                            and r[5] == ids[rel] and r[6] == meta["spack_lock_sha256"][:12]]
                assert len(matching) == 1, (day, value, shown)
        failed = [r for r in shown if r[4] == "FAIL"]
        assert sorted(r[2] for r in failed) == ["0.12 ratio", "150 MiB/s"]  # release 1's day

        # each point in a chart links to its release's row, which the page has
        areas = browser.evaluate("Array.from(document.querySelectorAll('area')).map(a => "
                                 "[a.getAttribute('href'), a.coords, a.title])")
        assert len(areas) == 2 * len(DAYS)
        assert {a[0] for a in areas} == {f"#release-{ids[r]}" for r, _, _ in DAYS}
        release_rows = {r[0]: r for r in rows(browser, "table.releases tr[id]")}
        assert set(release_rows) == set(ids)
        assert release_rows[ids[1]][4] == "failed" and release_rows[ids[2]][5] == "current"
        assert [release_rows[i][6] for i in ids] == ["2", "1", "2"]     # sessions on each
        browser.evaluate("document.querySelector('area[href=\"#release-%s\"]').click()" % ids[1])
        assert browser.evaluate("document.querySelector(':target').id") == f"release-{ids[1]}"

        shot = root / "report-screenshot.png"
        width, height = browser.screenshot(shot)
        assert width >= 1280 and height > 1500
        assert report_png_size(shot) == (width, height)

        # the image check can fail: a chart that is missing, or not a PNG, does not load
        spoilt = pathlib.Path(shutil.copytree(index.parent, tmp_path / "spoilt"))
        (spoilt / pngs[0]).unlink()
        (spoilt / pngs[1]).write_bytes(b"not a PNG\n" * 100)
        browser.open((spoilt / index.name).as_uri())
        assert sorted(broken_images(browser)) == pngs


def report_png_size(path: pathlib.Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_chart_points_link_from_where_they_are_drawn(deployment):
    """The image map's circles sit on the drawn markers: the pixel under each is a line
    colour or the red cross, not the white or the band around it."""
    import matplotlib.image

    _, _, index = deployment
    page = index.read_text()
    for png in index.parent.glob("*.png"):
        pixels = matplotlib.image.imread(png)[..., :3]
        name = f"points-{png.stem}"
        block = page.split(f"<map name='{name}'>")[1].split("</map>")[0]
        coords = [tuple(map(int, c.split(",")[:2])) for c in
                  (a.split("coords='")[1].split("'")[0] for a in block.split("<area")[1:])]
        assert len(coords) == len(DAYS)
        for x, y in coords:
            patch = pixels[y - 2:y + 3, x - 2:x + 3].reshape(-1, 3)
            saturation = patch.max(axis=1) - patch.min(axis=1)
            assert saturation.max() > 0.4, (png.name, x, y)  # a marker, not white or the band
