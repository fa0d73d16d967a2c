"""bin/iostack report turns stored sessions into charts with reference bands and a page."""
import re
import struct

from iostack.regression import report, results

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def assert_real_picture(path):
    """A PNG of a sensible size whose pixels are not one flat colour."""
    import matplotlib.image
    import numpy

    width, height = png_size(path)
    assert 400 <= width <= 3000 and 200 <= height <= 2000
    pixels = matplotlib.image.imread(path)
    assert pixels.shape[:2] == (height, width)
    assert float(pixels[..., :3].std()) > 0.02
    colours = numpy.unique((pixels[..., :3] * 255).astype(int).reshape(-1, 3), axis=0)
    assert len(colours) > 20


def case(name, t, perf, result="pass", system="local", partition="default"):
    return {"name": name, "system": system, "partition": partition, "environ": "stack",
            "result": result, "fail_reason": None if result == "pass" else "performance error",
            "job_completion_time_unix": t, "perfvalues": perf}


def sessions():
    out = []
    for day in range(5):
        t = 1_790_000_000 + day * 86400
        ratio = 0.3 + 0.02 * day
        out.append({
            "session_info": {"uuid": f"s{day}", "time_start_unix": t, "time_start": f"day{day}",
                             "num_cases": 3, "num_failures": int(day == 4), "hostname": "vm",
                             "commit": "abc123", "spack_lock_sha256": "f" * 64},
            "runs": [{"testcases": [
                case("FdbThroughputCheck %async_write=False", t + 10,
                     {"local:default:fdb_write_ratio": [ratio, 0.3, -0.7, None, "ratio",
                                                        "fail" if day == 4 else "pass"],
                      "local:default:fdb_write_bw": [200 + day, 0, None, None, "MiB/s", "pass"]},
                     result="fail" if day == 4 else "pass"),
                case("FdbThroughputCheck %async_write=False", t + 20,
                     {"new:part:fdb_write_ratio": [0.4, 1.7e308, 0, None, "ratio", "fail"]},
                     result="fail", system="new", partition="part"),
                case("StackSmokeCheck %package=fdb@5.10.8", t + 5, {}),
            ]}],
        })
    return out


def test_report_draws_a_chart_per_check_and_variable_and_a_page(tmp_path):
    index = report.write("local", sessions(), tmp_path)
    pngs = sorted(tmp_path.glob("*.png"))
    assert [p.name for p in pngs] == ["FdbThroughputCheck__fdb_write_bw.png",
                                      "FdbThroughputCheck__fdb_write_ratio.png"]
    for png in pngs:
        assert_real_picture(png)
    page = index.read_text()
    assert set(re.findall(r"<img src='([^']+)'", page)) == {p.name for p in pngs}
    # the latest results table: every case, pass/fail, values with their band
    assert "StackSmokeCheck %package=fdb@5.10.8" in page
    assert "<td class='result'>FAIL</td>" in page and "<td class='result'>PASS</td>" in page
    assert "fdb_write_ratio = 0.38 ratio" in page
    assert "no baseline" in page
    assert "abc123" in page and "f" * 64 in page
    assert (tmp_path / "latest-session.json").is_file()


def test_bounds_follow_reframe_semantics():
    assert report.bounds(100.0, -0.1, 0.2) == (90.0, 120.0)
    assert report.bounds(100.0, -0.1, None) == (90.0, None)
    assert report.bounds(0, -2, 5) == (-2, 5)
    assert report.bounds(1.7e308, 0, None) == (None, None)
    assert report.bounds(0, None, None) == (None, None)


def test_retries_count_once_with_their_last_attempt():
    s = {"runs": [{"testcases": [case("A", 1, {}, result="fail")]},
                  {"testcases": [case("A", 2, {}, result="pass")]}]}
    (only,) = results.last_attempts(s).values()
    assert only["result"] == "pass"


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
