"""bin/iostack report turns stored sessions into charts with reference bands and a page
(its template, templates/report.html). The sessions are run reports ReFrame wrote
(tests/data/reframe/report/, how: tests/support/reframe_runs.py), and the comparison of the
latest with the earlier ones is the table ReFrame printed for them."""
import html.parser
import json
import re
import struct

from reframe_reports import DATA, SERIES, kept, real_report, series
from support.reframe_runs import COMPARISON, RELEASE_A, RELEASE_B

from iostack.regression import report, results

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def assert_real_picture(path):
    """A PNG the page can show at a readable size (what it draws is checked where it is
    drawn: the markers under the image map, tests/integration/test_report_browser.py)."""
    width, height = png_size(path)
    assert 400 <= width <= 3000 and 200 <= height <= 2000


class _Tables(html.parser.HTMLParser):
    """The rows of a page's tables, each cell's text, by the class of the table or of the
    element around it (`div.points` holds a chart's points)."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._where: list[str] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        cls = dict(attrs).get("class") or ""
        if tag == "div":
            self._where.append(cls)
        elif tag == "table":
            self._where.append(cls or (self._where[-1] if self._where else ""))
            self.tables.setdefault(self._where[-1], [])
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append("\n")

    def handle_endtag(self, tag):
        if tag in ("div", "table") and self._where:
            self._where.pop()
        elif tag in ("td", "th") and self._row is not None and self._cell is not None:
            lines = "".join(self._cell).split("\n")
            self._row.append("\n".join(" ".join(line.split()) for line in lines).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[self._where[-1]].append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data.replace("\n", " "))


def tables(page: str) -> dict[str, list[list[str]]]:
    """{table or div class: its rows after the header row}, the points tables in page order."""
    parser = _Tables()
    parser.feed(page)
    return {cls: rows[1:] for cls, rows in parser.tables.items()}


def points_tables(page: str) -> list[list[list[str]]]:
    return [tables("<div class='points'>" + block)["points"]
            for block in page.split("<div class='points'>")[1:]]


def test_report_draws_a_chart_per_check_and_variable_and_a_page(tmp_path):
    nights = series()
    index = report.write("local", nights, tmp_path)
    pngs = sorted(tmp_path.glob("*.png"))
    # a chart per check and performance variable; the smoke check has none
    assert [p.name for p in pngs] == ["TinyNewSystemCheck__fdb_write_bw.png",
                                      "TinyNewSystemCheck__fdb_write_ratio.png",
                                      "TinyThroughputCheck__fdb_write_bw.png",
                                      "TinyThroughputCheck__fdb_write_ratio.png"]
    for png in pngs:
        assert_real_picture(png)
    page = index.read_text()
    assert set(re.findall(r"<img src='([^']+)'", page)) == {p.name for p in pngs}

    # the latest results table: every case, its verdict, its values with their bands
    latest = {row[0]: row for row in tables(page)["latest"]}
    assert sorted(latest) == ["TinyNewSystemCheck %size=small", "TinySmokeCheck",
                              "TinyThroughputCheck %size=small"]
    bw, ratio, (release, _, _) = SERIES[-1]
    throughput = latest["TinyThroughputCheck %size=small"]
    assert throughput[1:3] == ["local:default+builtin", "FAIL"] and throughput[4] == release
    assert throughput[5].split("\n") == [f"fdb_write_bw = {bw:g} MiB/s (reference: 180 to 220 MiB/s)",
                                         f"fdb_write_ratio = {ratio:g} ratio (reference: at least "
                                         "0.15 ratio)"]
    assert "failed to meet reference(s)" in throughput[6]
    new_system = latest["TinyNewSystemCheck %size=small"]
    assert new_system[2] == "FAIL"
    assert new_system[5].split("\n") == [
        f"fdb_write_bw = {bw:g} MiB/s (reference: not checked)",
        f"fdb_write_ratio = {ratio:g} ratio (reference: no baseline recorded (bin/iostack "
        "record-baseline))"]
    assert latest["TinySmokeCheck"][2] == "PASS"
    assert latest["TinySmokeCheck"][5] == "no performance variables"
    # the values that failed are marked: both of the out-of-band case, the no-baseline ratio
    assert page.count("<span class='fail'>") == 3

    # the summary names the latest session's release, commit and lock
    _, commit, lock = RELEASE_B
    assert f"{len(nights)} stored session(s)" in page
    assert f"<span class='hash'>{commit[:16]}</span>" in page and f"title='{lock}'" in page
    assert f"(session {nights[-1]['session_info']['uuid']})" in page

    # under each chart, every point newest first with its release and lock
    points = points_tables(page)
    assert len(points) == len(pngs)
    bw_points = points[2]       # TinyThroughputCheck's fdb_write_bw
    assert [row[2] for row in bw_points] == [f"{b:g} MiB/s" for b, _, _ in reversed(SERIES)]
    assert [row[4] for row in bw_points] == ["FAIL", "PASS", "PASS", "PASS"]
    assert [(row[5], row[6]) for row in bw_points] == [
        (rel, lk[:12]) for _, _, (rel, _, lk) in reversed(SERIES)]
    # and each point drawn links to its release
    block = page.split("<map name='points-TinyThroughputCheck__fdb_write_bw'>")[1].split("</map>")[0]
    assert sorted(re.findall(r"href='#release-([^']+)'", block)) == sorted(
        rel for _, _, (rel, _, _) in SERIES)
    assert json.loads((tmp_path / "latest-session.json").read_text()) == nights[-1]


def test_the_latest_session_beside_the_median_of_the_earlier_ones_as_reframe_compares(tmp_path):
    """The table ReFrame printed for the series (`--performance-compare`, the command
    results.comparison_command gives): the last night beside the median of the three
    before, so a spec that took other sessions for either side would show here."""
    rows = results.parse_comparison((DATA / "report" / COMPARISON).read_text())
    by_var = {(r.name, r.var): r for r in rows}
    assert sorted(by_var) == [(check, var) for check in ("TinyNewSystemCheck %size=small",
                                                         "TinyThroughputCheck %size=small")
                              for var in ("fdb_write_bw", "fdb_write_ratio")]
    bw = by_var[("TinyThroughputCheck %size=small", "fdb_write_bw")]
    earlier = sorted(b for b, _, _ in SERIES[:-1])[1]     # the median of three
    assert (bw.latest, bw.earlier) == (SERIES[-1][0], earlier)
    assert (bw.latest_samples, bw.earlier_samples) == (1, len(SERIES) - 1)
    assert bw.diff_percent == round(100 * (bw.latest - earlier) / earlier, 2)

    index = report.write("local", series(), tmp_path, comparison=rows)
    shown = {(row[0], row[2]): row for row in tables(index.read_text())["compare"]}
    assert shown[("TinyThroughputCheck %size=small", "fdb_write_bw")] == [
        "TinyThroughputCheck %size=small", "local:default+builtin", "fdb_write_bw",
        f"{bw.latest:g} MiB/s", f"{earlier:g} MiB/s (of 3)", f"{bw.diff_percent:+g} %"]


def test_a_comparison_without_earlier_values_has_no_rows():
    """ReFrame's table when no earlier session has a value: `<no data>` rows."""
    text = (DATA / "report" / "first-compare.tsv").read_text()
    assert "<no data>" in text
    assert results.parse_comparison(text) == []


def test_bounds_agree_with_reframes_verdicts():
    """Each value ReFrame judged is inside the band `bounds` draws exactly when ReFrame
    passed it (the no-baseline reference draws no band: nothing passes it)."""
    judged = 0
    for night in series():
        for tc in results.last_attempts(night).values():
            for pv in results.perf_values(tc).values():
                lo, hi = report.bounds(pv.ref, pv.lower, pv.upper)
                inside = (lo is None or pv.value >= lo) and (hi is None or pv.value <= hi)
                if lo is None and hi is None and pv.result == "fail":
                    assert pv.ref == report.references.NO_BASELINE
                    continue
                assert inside == (pv.result == "pass"), (tc["name"], pv)
                judged += 1
    assert judged == 3 * len(SERIES)    # two of TinyThroughputCheck, bw of TinyNewSystemCheck


def test_bounds_follow_reframe_semantics():
    assert report.bounds(100.0, -0.1, 0.2) == (90.0, 120.0)
    assert report.bounds(100.0, -0.1, None) == (90.0, None)
    assert report.bounds(0, -2, 5) == (-2, 5)
    assert report.bounds(1.7e308, 0, None) == (None, None)
    assert report.bounds(0, None, None) == (None, None)


def test_retries_count_once_with_their_last_attempt(tmp_path):
    retried = kept("retry")
    assert [tc["result"] for run in retried["runs"] for tc in run["testcases"]] == ["fail", "pass"]
    (only,) = results.last_attempts(retried).values()
    assert only["result"] == "pass" and only["run_index"] == 1
    index = report.write("local", [retried], tmp_path)
    assert [row[:3] for row in tables(index.read_text())["latest"]] == [
        ["TinyFlakyCheck", "local:default+builtin", "PASS"]]


def test_a_session_before_releases_shows_no_release(tmp_path):
    index = report.write("local", [real_report()], tmp_path)
    page = index.read_text()
    assert "<p>No releases: these sessions ran on a deployment without releases.</p>" in page
    assert {row[4] for row in tables(page)["latest"]} == {"-"}
    assert RELEASE_A[0] not in page


def test_band_reads_as_words_with_its_unit():
    assert report.band_text(90.0, 120.0, "MiB/s") == "90 to 120 MiB/s"
    assert report.band_text(0.15, None, "ratio") == "at least 0.15 ratio"
    assert report.band_text(None, 5.0, "s") == "at most 5 s"
    assert report.band_text(None, None) == "not checked"
    assert report.band_text(1.0, 2.0, "s", no_baseline=True).startswith("no baseline recorded")


def test_legend_names_what_differs_and_the_rest_once():
    common, short = report.legend_labels(["local:default+stack %size=small %async_write=True",
                                          "local:default+stack %size=small %async_write=False"])
    assert common == "local:default+stack %size=small"
    assert sorted(short.values()) == ["%async_write=False", "%async_write=True"]
    assert report.legend_labels(["only one"]) == ("", {"only one": "only one"})


def test_text_from_a_report_is_text_not_markup(tmp_path):
    """A failure reason is ReFrame's text: the first attempt of the retried case quotes its
    sanity pattern, `^<done>$`, which the page shows as written."""
    night = kept("retry")
    night["runs"] = night["runs"][:1]   # its failed attempt alone
    page = report.write("local", [night], tmp_path).read_text()
    assert "<done>" not in page and "&lt;done&gt;" in page
    (row,) = tables(page)["latest"]
    assert row[2] == "FAIL"
    assert row[6] == "sanity error: pattern '^<done>$' not found in 'rfm_job.out'"
