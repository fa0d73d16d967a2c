"""bin/iostack report draws the sweeps within a job (FDB writers, NetCDF ranks) against the
count, from the latest session that has them, instead of one chart over time per count."""
import re

from test_report import assert_real_picture, case

from iostack.regression import report


def scaling_session(uuid, t, ratios, with_netcdf=True):
    fdb = {f"local:default:fdb_write_ratio_writers_{n}": [r, 0, None, None, "ratio", "pass"]
           for n, r in ratios.items()}
    fdb["local:default:best_ratio"] = [max(ratios.values()), 0.5, -0.7, None, "ratio", "pass"]
    cases = [case("FdbWriterScalingCheck %size=small %durability=sync-flush", t, fdb)]
    if with_netcdf:
        for model, scale in (("inmcm6p", 1.0), ("inmcm6m", 4.0)):
            cases.append(case(f"NetcdfOutputScalingCheck %library=netcdf %model={model}", t, {
                f"local:default:seconds_batching_ranks_{n}": [scale / n, 0, None, None, "s", "pass"]
                for n in (1, 2, 4)}))
    return {"session_info": {"uuid": uuid, "time_start_unix": t, "num_cases": len(cases)},
            "runs": [{"testcases": cases}]}


def test_sweeps_come_from_the_latest_session_that_has_them():
    sessions = [scaling_session("old", 1_790_000_000, {1: 0.2, 2: 0.3}),
                scaling_session("new", 1_790_086_400, {1: 0.5, 2: 0.7, 4: 0.6}, with_netcdf=False)]
    sweeps = report.sweeps(sessions)
    assert set(sweeps) == {("FdbWriterScalingCheck", "fdb_write_ratio", "writers"),
                           ("NetcdfOutputScalingCheck", "seconds_batching", "ranks")}
    fdb = sweeps[("FdbWriterScalingCheck", "fdb_write_ratio", "writers")]
    assert fdb["session"] == "new" and fdb["unit"] == "ratio"
    assert list(fdb["lines"].values()) == [[(1, 0.5), (2, 0.7), (4, 0.6)]]
    netcdf = sweeps[("NetcdfOutputScalingCheck", "seconds_batching", "ranks")]
    assert netcdf["session"] == "old"
    assert sorted(netcdf["lines"]) == ["local:default+stack %library=netcdf %model=inmcm6m",
                                       "local:default+stack %library=netcdf %model=inmcm6p"]


def test_the_page_has_one_chart_per_sweep_and_none_per_count(tmp_path):
    sessions = [scaling_session("s1", 1_790_000_000, {1: 0.5, 2: 0.7})]
    index = report.write("local", sessions, tmp_path)
    names = sorted(p.name for p in tmp_path.glob("*.png"))
    assert names == ["FdbWriterScalingCheck__best_ratio.png",
                     "FdbWriterScalingCheck__fdb_write_ratio__by_writers.png",
                     "NetcdfOutputScalingCheck__seconds_batching__by_ranks.png"]
    for name in names:
        assert_real_picture(tmp_path / name)
    assert set(re.findall(r"<img src='([^']+)'", index.read_text())) == set(names)
