"""netcdf-output-bench's files as CF tools see them: every file of both libraries passes
the IOOS compliance checker's CF-1.11 suite in full (an independent checker, from PyPI), and
xarray decodes its calendar, axes and values."""
from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
import xarray as xr
from test_netcdf_bench import GRIDS, OUTPUT_TYPES, bench, mpirun, value  # noqa: F401

CF_SUITE = "cf:1.11"
LEVELS = {"dxyz": ("plev", "air_pressure", "Pa"), "dxys": ("slev", "depth", "m")}


@pytest.fixture(scope="module")
def written(bench, tmp_path_factory):  # noqa: F811
    """One combined run per library: six files each (NetCDF-4 and CDF-5)."""
    out = {}
    for library in ("netcdf", "pnetcdf"):
        out[library] = tmp_path_factory.mktemp(f"cf-{library}")
        mpirun(bench, "--mode", "combined", "--library", library, "--days", 1,
               "--output-dir", out[library])
    return out


@pytest.fixture(scope="module")
def checker(venv_bin):
    exe = venv_bin / "compliance-checker"
    if not exe.exists():
        pytest.fail("compliance-checker is not installed: run bin/iostack setup (requirements.txt)")
    return exe


@pytest.mark.parametrize("library", ["netcdf", "pnetcdf"])
@pytest.mark.parametrize("output_type", [t[0] for t in OUTPUT_TYPES])
def test_compliance_checker_finds_nothing_to_correct(written, checker, library, output_type):
    path = written[library] / f"{output_type}.nc"
    p = subprocess.run([checker, "--test", CF_SUITE, "--format", "json", "--output", "-",
                        path], capture_output=True, text=True, timeout=300)
    report = json.loads(p.stdout[p.stdout.index("{"):])[CF_SUITE]
    issues = [f"{r['name']}: {m}" for r in report["all_priorities"] for m in r["msgs"]]
    assert issues == []
    assert report["scored_points"] == report["possible_points"] > 0
    assert p.returncode == 0


@pytest.mark.parametrize("library", ["netcdf", "pnetcdf"])
def test_xarray_decodes_time_axes_and_values(written, library):
    nlat, nlon = GRIDS["inmcm6p"]
    with xr.open_dataset(written[library] / "6h.nc", engine="netcdf4") as ds:
        assert ds.attrs["Conventions"] == "CF-1.11"
        # four records a day, at 06, 12, 18 and 24 h after 2000-01-01 00:00, standard calendar
        assert [str(t)[:16] for t in ds["time"].values] == [
            "2000-01-01T06:00", "2000-01-01T12:00", "2000-01-01T18:00", "2000-01-02T00:00"]
        assert ds["time"].encoding["calendar"] == "standard"
        assert ds["lat"].attrs["standard_name"] == "latitude" and ds.sizes["lat"] == nlat
        assert ds["lon"].attrs["units"] == "degrees_east" and ds.sizes["lon"] == nlon
        field = ds["field_44"]
        assert field.attrs["units"] == "1" and "6h output field 44" in field.attrs["long_name"]
        uid = sum(t[1] for t in OUTPUT_TYPES[:3]) + 43
        assert field.isel(time=3, lat=7).values.tolist() == [value(uid, 3, 0, 7, i)
                                                             for i in range(nlon)]


@pytest.mark.parametrize("output_type", sorted(LEVELS))
def test_levels_are_vertical_coordinates_with_units(written, output_type):
    name, standard_name, units = LEVELS[output_type]
    with xr.open_dataset(written["pnetcdf"] / f"{output_type}.nc", engine="netcdf4") as ds:
        level = ds[name]
        assert (level.attrs["standard_name"], level.attrs["units"]) == (standard_name, units)
        assert level.attrs["positive"] == "down" and level.attrs["axis"] == "Z"
        values = level.values
        # pressure falls with height from 1000 hPa, depth grows downward from 0.1 m
        steps = np.diff(values)
        assert (steps < 0).all() if standard_name == "air_pressure" else (steps > 0).all()
        assert values[0] == (100000.0 if standard_name == "air_pressure" else np.float32(0.1))


def test_the_files_are_byte_stable(bench, written, tmp_path):  # noqa: F811
    """No run date or host in the metadata: a second run writes the same bytes."""
    mpirun(bench, "--mode", "combined", "--library", "pnetcdf", "--days", 1,
           "--output-dir", tmp_path)
    for path in sorted(written["pnetcdf"].iterdir()):
        assert (tmp_path / path.name).read_bytes() == path.read_bytes(), path.name
