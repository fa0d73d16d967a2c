"""The NetCDF output benchmark's workload table ([INMCM-NetCDF]) and what each mode must leave."""
from iostack_rfm.parsers import netcdf


def test_bytes_per_day_are_the_seeds_megabytes():
    # [INMCM-NetCDF]: INMCM6P 79.5 MB a day, INMCM6M 312 MB (decimal megabytes of float32 data)
    assert netcdf.expected_bytes("inmcm6p", 1) == 79_488_000
    assert round(netcdf.expected_bytes("inmcm6p", 1) / 1e6, 1) == 79.5
    assert netcdf.expected_bytes("inmcm6m", 1) == 311_662_080
    assert round(netcdf.expected_bytes("inmcm6m", 1) / 1e6) == 312
    assert netcdf.expected_bytes("inmcm6m", 5) == 5 * 311_662_080


def test_fields_records_and_files_per_mode():
    assert netcdf.fields() == 71 + 7 + 10 + 44 + 37 + 2 == 171
    # daily types once, 6-hourly 4 times, 3-hourly 8, hourly 24
    assert netcdf.expected_records(1) == 71 + 7 + 10 + 44 * 4 + 37 * 8 + 2 * 24 == 608
    assert {m: netcdf.expected_files(m) for m in netcdf.MODES} == {
        "serial": 171, "separate": 171, "combined": 6, "batching": 6}


def test_grids():
    g = netcdf.GRIDS["inmcm6p"]
    assert (g.nlat, g.nlon, g.nplevs, g.nslevs) == (120, 180, 17, 21)
    g = netcdf.GRIDS["inmcm6m"]
    assert (g.nlat, g.nlon, g.nplevs, g.nslevs) == (180, 288, 26, 73)
