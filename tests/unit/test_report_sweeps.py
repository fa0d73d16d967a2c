"""bin/iostack report draws the sweeps within a job (FDB writers, NetCDF ranks) against the
count, from the latest session that has them, instead of one chart over time per count.
The sessions are run reports ReFrame wrote (tests/data/reframe/report/sweeps-*.json: both
sweeps, then only the writers' with one more count)."""
import re

from reframe_reports import kept
from test_report import assert_real_picture

from iostack.regression import report


def test_sweeps_come_from_the_latest_session_that_has_them():
    older, newer = kept("sweeps-1"), kept("sweeps-2")
    sweeps = report.sweeps([older, newer])
    assert set(sweeps) == {("TinyWriterScalingCheck", "fdb_write_ratio", "writers"),
                           ("TinyRankScalingCheck", "seconds_batching", "ranks")}
    writers = sweeps[("TinyWriterScalingCheck", "fdb_write_ratio", "writers")]
    assert writers["session"] == newer["session_info"]["uuid"] and writers["unit"] == "ratio"
    assert list(writers["lines"].values()) == [[(1, 0.5), (2, 0.7), (4, 0.6)]]
    ranks = sweeps[("TinyRankScalingCheck", "seconds_batching", "ranks")]
    assert ranks["session"] == older["session_info"]["uuid"] and ranks["unit"] == "s"
    assert ranks["lines"] == {
        "local:default+builtin %model=inmcm6m": [(1, 4.0), (2, 2.0), (4, 1.0)],
        "local:default+builtin %model=inmcm6p": [(1, 1.0), (2, 0.5), (4, 0.25)]}


def test_the_page_has_one_chart_per_sweep_and_none_per_count(tmp_path):
    index = report.write("local", [kept("sweeps-1")], tmp_path)
    names = sorted(p.name for p in tmp_path.glob("*.png"))
    # best_ratio is no sweep: a chart over time
    assert names == ["TinyRankScalingCheck__seconds_batching__by_ranks.png",
                     "TinyWriterScalingCheck__best_ratio.png",
                     "TinyWriterScalingCheck__fdb_write_ratio__by_writers.png"]
    for name in names:
        assert_real_picture(tmp_path / name)
    assert set(re.findall(r"<img src='([^']+)'", index.read_text())) == set(names)
