"""netcdf-output-bench built with CMake against Debian's parallel netCDF-C and
PnetCDF, run with `mpirun -np 2` in every mode on one INMCM6P day.

Bytes are float32 data values only (no headers, no coordinates): one day of
INMCM6P is 79,488,000 bytes, the seed's "79.5 MB" in decimal megabytes; one
day of INMCM6M is 311,662,080 bytes, its "312 MB".
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import struct
import subprocess

import pytest

SOURCE = pathlib.Path(__file__).resolve().parents[2] / "src" / "netcdf-output-bench"

# (name, fields, records per day, levels on INMCM6P, levels on INMCM6M) from [INMCM-NetCDF]
OUTPUT_TYPES = [
    ("dxu", 71, 1, 1, 1),
    ("dxyz", 7, 1, 17, 26),
    ("dxys", 10, 1, 21, 73),
    ("6h", 44, 4, 1, 1),
    ("3h", 37, 8, 1, 1),
    ("1h", 2, 24, 1, 1),
]
GRIDS = {"inmcm6p": (120, 180), "inmcm6m": (180, 288)}
TOTAL_FIELDS = sum(t[1] for t in OUTPUT_TYPES)
SUMMARY = re.compile(r"^netcdf-output-bench: (.*)$", re.M)
VERIFY = re.compile(r"^verify: (OK|FAILED) (.*)$", re.M)

pytestmark = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("cmake", "mpicc", "mpirun", "pkg-config")),
    reason="needs cmake, Open MPI and pkg-config",
)


def expected_bytes(model: str, days: int = 1) -> int:
    nlat, nlon = GRIDS[model]
    column = 3 if model == "inmcm6p" else 4
    return days * sum(t[1] * t[2] * t[column] * nlat * nlon * 4 for t in OUTPUT_TYPES)


def value(uid: int, rec: int, lev: int, j: int, i: int) -> float:
    """The benchmark's deterministic value, recomputed independently."""
    key = uid
    for part in (rec, lev, j, i):
        key = (key * 1000003 + part) & 0xFFFFFFFF
    h = key
    h ^= h >> 16
    h = (h * 0x7FEB352D) & 0xFFFFFFFF
    h ^= h >> 15
    h = (h * 0x846CA68B) & 0xFFFFFFFF
    h ^= h >> 16
    return (h >> 12) / 16.0


def fields_of(line: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in line.split())


def rounding(phases: list[float]) -> float:
    """How far the sum of printed phase times can fall below the printed total although
    the measured total is at most the measured phases' sum: the bench prints seconds with
    %.6f, each value within half a µs of the measured one (the phases' and the total's),
    plus the float error of adding them, far below that."""
    return 0.5e-6 * (len(phases) + 1) + 1e-12


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> pathlib.Path:
    build = tmp_path_factory.mktemp("nob-build")
    subprocess.run(["cmake", "-S", SOURCE, "-B", build, "-DCMAKE_BUILD_TYPE=Release"],
                   check=True, capture_output=True)
    subprocess.run(["cmake", "--build", build, "-j2"], check=True, capture_output=True)
    return build / "netcdf-output-bench"


def mpirun(bench: pathlib.Path, *args, np: int = 2, check: bool = True, prefix=()):
    """`prefix` runs mpirun under another program (strace)."""
    cmd = [*prefix, "mpirun", "--oversubscribe", "-np", str(np)]
    if os.geteuid() == 0:
        cmd.insert(len(prefix) + 1, "--allow-run-as-root")
    env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1")
    proc = subprocess.run(cmd + [str(bench), *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=1800)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} {args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def runs(bench, tmp_path_factory):
    """One verified run per (mode, library); shared by the checks below."""
    results = {}
    for library, modes in (("netcdf", ("serial", "separate", "combined", "batching")),
                           ("pnetcdf", ("separate", "combined", "batching"))):
        for mode in modes:
            out = tmp_path_factory.mktemp(f"nob-{mode}-{library}")
            proc = mpirun(bench, "--mode", mode, "--library", library, "--days", 1,
                          "--output-dir", out, "--verify")
            summary = fields_of(SUMMARY.search(proc.stdout).group(1))
            verify = VERIFY.search(proc.stdout)
            results[(mode, library)] = (out, summary, verify)
    return results


def test_plan_matches_seed_megabytes_per_day(bench):
    plan = subprocess.run([bench, "--plan-only"], capture_output=True, text=True, check=True)
    total = fields_of(plan.stdout.strip().splitlines()[-1].removeprefix("plan: "))
    assert int(total["bytes"]) == expected_bytes("inmcm6p") == 79_488_000
    assert round(int(total["bytes"]) / 1e6, 1) == 79.5
    assert int(total["fields"]) == TOTAL_FIELDS == 171

    plan_m = subprocess.run([bench, "--plan-only", "--model", "inmcm6m", "--days", "2"],
                            capture_output=True, text=True, check=True)
    total_m = fields_of(plan_m.stdout.strip().splitlines()[-1].removeprefix("plan: "))
    assert int(total_m["bytes"]) == expected_bytes("inmcm6m", days=2) == 2 * 311_662_080
    assert round(int(total_m["bytes"]) / 2 / 1e6) == 312


def test_every_mode_verifies_with_one_checksum(runs, capsys):
    checksums = set()
    for (mode, library), (out, summary, verify) in runs.items():
        files = sorted(p.name for p in out.iterdir())
        if mode in ("serial", "separate"):
            assert len(files) == TOTAL_FIELDS, (mode, library)
            assert "dxys_field_10." + ("bin" if mode == "serial" else "nc") in files
        else:
            assert files == sorted(f"{t[0]}.nc" for t in OUTPUT_TYPES), (mode, library)
        assert int(summary["files"]) == len(files)
        # the data really landed: all of it, plus headers and coordinates of a few percent
        # (CF metadata costs a NetCDF-4 file about 6 KB: 3.5 % over 171 files of one field)
        on_disk = sum(p.stat().st_size for p in out.iterdir())
        assert expected_bytes("inmcm6p") <= on_disk <= 1.04 * expected_bytes("inmcm6p"), (mode, library)
        assert int(summary["bytes"]) == expected_bytes("inmcm6p")
        assert summary["ranks"] == "2" and summary["mode"] == mode
        assert verify and verify.group(1) == "OK", (mode, library)
        verified = fields_of(verify.group(2))
        assert int(verified["fields"]) == TOTAL_FIELDS
        assert int(verified["mismatches"]) == 0
        assert verified["checksum"] == summary["checksum"]
        checksums.add(summary["checksum"])
    assert len(checksums) == 1, checksums

    # serial files are headerless: exactly the data bytes, nothing else
    serial_dir = runs[("serial", "netcdf")][0]
    assert sum(p.stat().st_size for p in serial_dir.iterdir()) == expected_bytes("inmcm6p")

    serial = float(runs[("serial", "netcdf")][1]["seconds"])
    with capsys.disabled():
        for _, summary, _ in runs.values():
            print(f"\n  netcdf-output-bench {summary['mode']:9s} {summary['library']:8s}"
                  f" {summary['seconds']:>10s} s {summary['MiB/s']:>9s} MiB/s", end="")
        batching = float(runs[("batching", "netcdf")][1]["seconds"])
        print(f"\n  batching/serial speedup (serial s / batching s, netCDF-C): "
              f"{serial / batching:.2f}x")


def test_serial_record_layout_is_the_models(runs):
    """Record r of a field starts at r * nlev*nlat*nlon*4, little-endian float32."""
    out = runs[("serial", "netcdf")][0]
    nlat, nlon = GRIDS["inmcm6p"]
    uid_1h_field_2 = 169 + 1
    with open(out / "1h_field_02.bin", "rb") as f:
        f.seek((5 * nlat + 77) * nlon * 4)   # record 5, latitude row 77
        row = struct.unpack(f"<{nlon}f", f.read(nlon * 4))
    assert list(row) == [value(uid_1h_field_2, 5, 0, 77, i) for i in range(nlon)]


def test_ncdump_reads_the_values(runs):
    ncdump = shutil.which("ncdump")
    if not ncdump:
        pytest.skip("ncdump (netcdf-bin) not installed")
    out = runs[("combined", "netcdf")][0]
    header = subprocess.run([ncdump, "-h", out / "dxys.nc"], capture_output=True, text=True,
                            check=True).stdout
    assert "slev = 21 ;" in header and "time = 1 ;" in header
    assert "float field_10(time, slev, lat, lon) ;" in header
    assert len(re.findall(r"float field_\d\d\(", header)) == 10
    kind = subprocess.run([ncdump, "-k", runs[("combined", "pnetcdf")][0] / "dxu.nc"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert kind == "cdf5"

    # -p 9: enough float digits to print every value exactly
    dump = subprocess.run([ncdump, "-p", "9", "-v", "field_03", out / "dxu.nc"], capture_output=True,
                          text=True, check=True).stdout
    numbers = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?",
                                            dump.split("field_03 =", 1)[1])]
    nlat, nlon = GRIDS["inmcm6p"]
    assert len(numbers) == nlat * nlon
    assert numbers[:nlon] == [value(2, 0, 0, 0, i) for i in range(nlon)]
    assert numbers[-1] == value(2, 0, 0, nlat - 1, nlon - 1)


@pytest.mark.parametrize("library,endian", [("netcdf", "<"), ("pnetcdf", ">")])
def test_flipped_byte_fails_verification(bench, tmp_path, library, endian):
    out = tmp_path / "combined"
    mpirun(bench, "--mode", "combined", "--library", library, "--output-dir", out)
    assert mpirun(bench, "--mode", "combined", "--library", library, "--output-dir", out,
                  "--verify-only").returncode == 0

    # locate 16 known values of dxu field_05, record 0, row 60 in the file:
    # HDF5 stores native little-endian, CDF-5 big-endian
    uid, row = 4, 60
    pattern = struct.pack(f"{endian}16f", *(value(uid, 0, 0, row, i) for i in range(16)))
    path = out / "dxu.nc"
    data = bytearray(path.read_bytes())
    offset = data.find(pattern)
    assert offset > 0 and data.find(pattern, offset + 1) == -1
    data[offset + 9] ^= 0x40
    path.write_bytes(bytes(data))

    proc = mpirun(bench, "--mode", "combined", "--library", library, "--output-dir", out,
                  "--verify-only", check=False)
    assert proc.returncode != 0
    verify = VERIFY.search(proc.stdout)
    assert verify and verify.group(1) == "FAILED"
    assert fields_of(verify.group(2))["mismatches"] == "1"
    assert "dxu field_05 record 0" in proc.stderr and "lat=60 lon=2" in proc.stderr
