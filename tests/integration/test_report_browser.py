"""The report page as a person sees it: opened in headless Chromium (Debian's), with what
the browser rendered checked: every chart image decoded, each test case's latest verdict
with its reference band, and each point's release and lock, its point in the chart linking
to the release. A screenshot of the page is written too."""
import json
import pathlib

import pytest
from headless_chromium import Chromium, executable

from iostack.deployment import releases
from iostack.regression import report

pytestmark = pytest.mark.skipif(executable() is None, reason="chromium not installed (apt: chromium)")

DAY = 86400
T0 = 1_790_000_000
# (release index, fdb_write_bw, fdb_write_ratio): release 1 failed its regression
DAYS = [(0, 205.0, 0.31), (0, 199.0, 0.30), (1, 150.0, 0.12), (2, 201.0, 0.33), (2, 210.0, 0.29)]
BW_BAND = "180 to 220 MiB/s"        # 200, -10 %, +10 %
RATIO_BAND = "at least 0.15 ratio"  # 0.3, -50 %, open above


def case(name, t, perf, result):
    return {"name": name, "system": "local", "partition": "default", "environ": "stack",
            "result": result, "fail_reason": None if result == "pass" else "performance",
            "job_completion_time_unix": t, "perfvalues": perf}


@pytest.fixture
def deployment(tmp_path):
    """A deployment with three releases (the middle one failed) and five nightly sessions
    on them; IorCheck ran only in the first session."""
    root = tmp_path / "root"
    lock = tmp_path / "spack.lock"
    ids = []
    for i, verdict in enumerate([releases.PASSED, releases.FAILED, releases.PASSED]):
        lock.write_text(json.dumps({"roots": [], "n": i}))
        r = releases.create(root, "local", f"c0mm1t{i}", lock)
        releases.record(r, regression=verdict)
        (r.modulefiles / "Core").mkdir(parents=True)
        ids.append(r.id)
    releases.switch(root, ids[0])
    releases.switch(root, ids[2])
    sessions = []
    for day, (rel, bw, ratio) in enumerate(DAYS):
        t = T0 + day * DAY
        bw_ok, ratio_ok = 180 <= bw <= 220, ratio >= 0.15
        cases = [case("FdbThroughputCheck %async_write=False", t + 60, {
            "local:default:fdb_write_bw": [bw, 200, -0.1, 0.1, "MiB/s", "pass" if bw_ok else "fail"],
            "local:default:fdb_write_ratio": [ratio, 0.3, -0.5, None, "ratio",
                                              "pass" if ratio_ok else "fail"]},
            "pass" if bw_ok and ratio_ok else "fail"),
            case("StackSmokeCheck %package=fdb@5.10.8", t + 30, {}, "pass")]
        if day == 0:
            cases.append(case("IorCheck", t + 90, {}, "pass"))
        meta = releases.find(root, ids[rel]).meta
        sessions.append({"session_info": {
            "uuid": f"s{day}", "time_start_unix": t, "num_cases": len(cases),
            "num_failures": sum(c["result"] == "fail" for c in cases), "hostname": "vm",
            "commit": meta["commit"], "spack_lock_sha256": meta["spack_lock_sha256"],
            "release": ids[rel]}, "runs": [{"testcases": cases}]})
    out = root / "reframe" / "report"
    index = report.write("local", sessions, out, root)
    return root, ids, sessions, index


ROWS = """Array.from(document.querySelectorAll(SELECTOR)).map(
    tr => Array.from(tr.cells).map(td => td.innerText.trim()))"""


def rows(browser, selector):
    return browser.evaluate(ROWS.replace("SELECTOR", json.dumps(selector)))


def broken_images(browser):
    return browser.evaluate("Array.from(document.images).filter(i => !(i.complete && "
                            "i.naturalWidth > 0)).map(i => i.getAttribute('src'))")


def test_report_page_in_a_browser(deployment, tmp_path):
    root, ids, sessions, index = deployment
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
        assert sorted(latest) == ["FdbThroughputCheck %async_write=False", "IorCheck",
                                  "StackSmokeCheck %package=fdb@5.10.8"]
        fdb = latest["FdbThroughputCheck %async_write=False"]
        assert fdb[2] == "PASS" and fdb[4] == ids[2]
        assert f"fdb_write_bw = 210 MiB/s (reference: {BW_BAND})" in fdb[5]
        assert f"fdb_write_ratio = 0.29 ratio (reference: {RATIO_BAND})" in fdb[5]
        ior = latest["IorCheck"]
        assert ior[2] == "PASS" and ior[4] == ids[0] and ior[3].startswith("2026-")

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
        browser.evaluate("document.querySelector('area[href=\"#release-%s\"]').click()" % ids[1])
        assert browser.evaluate("document.querySelector(':target').id") == f"release-{ids[1]}"

        shot = root / "report-screenshot.png"
        width, height = browser.screenshot(shot)
        assert width >= 1280 and height > 1500
        assert report_png_size(shot) == (width, height)

        # the image check can fail: a chart that is missing, or not a PNG, does not load
        (index.parent / pngs[0]).unlink()
        (index.parent / pngs[1]).write_bytes(b"not a PNG\n" * 100)
        browser.open(index.as_uri())
        assert sorted(broken_images(browser)) == pngs


def report_png_size(path: pathlib.Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_chart_points_link_from_where_they_are_drawn(deployment):
    """The image map's circles sit on the drawn markers: the pixel under each is a line
    colour or the red cross, not the white or the band around it."""
    import matplotlib.image

    _, _, sessions, index = deployment
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
