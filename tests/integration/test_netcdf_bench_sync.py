"""netcdf-output-bench's durability, phases and access options, on 2 ranks: the syncs each
`--sync` mode adds, counted per file under strace (fsync of every rank through MPI-IO, or
rank 0's in serial mode), beside what each library does by itself; per-phase times adding
up to the total; independent access writing the same data; bad combinations refused."""
from __future__ import annotations

import collections
import re
import shutil

import pytest

import test_netcdf_bench as nob
from test_netcdf_bench import OUTPUT_TYPES, fields_of, mpirun

bench = nob.bench  # the build fixture

pytestmark = pytest.mark.skipif(not shutil.which("strace"), reason="strace not installed")

RECORDS = {name: per_day for name, _, per_day, *_ in OUTPUT_TYPES}
SYNC = re.compile(r"^\d+\s+(?:fsync|fdatasync)\(\d+<[^>]*/([^/>]+)>")


def fsyncs(bench, tmp_path, mode, library, sync):
    """{file: fsync/fdatasync calls} of a run, from strace -f over mpirun and its ranks."""
    out, trace = tmp_path / f"{mode}-{library}-{sync}", tmp_path / f"{mode}-{library}-{sync}.st"
    strace = ["strace", "-f", "-qq", "-y", "-e", "trace=fsync,fdatasync", "-o", str(trace)]
    mpirun(bench, "--mode", mode, "--library", library, "--sync", sync, "--output-dir", out,
           prefix=strace)
    return collections.Counter(m.group(1) for line in trace.read_text().splitlines()
                               if (m := SYNC.match(line)))


@pytest.mark.parametrize("library", ["netcdf", "pnetcdf"])
def test_each_sync_mode_adds_one_collective_sync_per_step_or_file(bench, tmp_path, library):
    counts = {sync: fsyncs(bench, tmp_path, "combined", library, sync)
              for sync in ("none", "step", "close")}
    files = {f"{t}.nc" for t in RECORDS}
    # netCDF-4 syncs at enddef and at close by itself (HDF5, MPI_File_sync); PnetCDF never
    own = 2 if library == "netcdf" else 0
    ranks = 2
    assert counts["none"] == {f: own * ranks for f in files if own}
    assert counts["step"] == {f"{t}.nc": (own + n) * ranks for t, n in RECORDS.items()}
    assert counts["close"] == {f: (own + 1) * ranks for f in files}


def test_serial_files_are_synced_by_rank_0_after_every_record(bench, tmp_path):
    assert fsyncs(bench, tmp_path, "serial", "netcdf", "none") == {}
    step = fsyncs(bench, tmp_path, "serial", "netcdf", "step")
    assert step == {f"{t}_field_{f:02d}.bin": RECORDS[t]
                    for t, fields, *_ in OUTPUT_TYPES for f in range(1, fields + 1)}


def test_phases_add_up_and_independent_access_writes_the_same_data(bench, tmp_path):
    runs = {}
    for access in ("collective", "independent"):
        p = mpirun(bench, "--mode", "batching", "--library", "netcdf", "--access", access,
                   "--sync", "step", "--output-dir", tmp_path / access, "--verify")
        summary = fields_of(p.stdout.splitlines()[0].split(": ", 1)[1])
        assert (summary["sync"], summary["access"]) == ("step", access)
        assert p.stdout.splitlines()[1].startswith("verify: OK ")
        phases = [float(summary[f"{ph}_seconds"]) for ph in ("create", "write", "close")]
        # each phase is its slowest rank's, the total the slowest rank's sum, so
        # max(phases) <= total <= sum(phases); printed to the µs (%.6f), which keeps the first
        # (rounding is monotonic) and moves the second by at most nob.rounding()
        assert all(s >= 0 for s in phases)
        assert max(phases) <= float(summary["seconds"]) <= sum(phases) + nob.rounding(phases)
        runs[access] = summary
    assert runs["collective"]["checksum"] == runs["independent"]["checksum"]


@pytest.mark.parametrize("args,problem", [
    (["--library", "pnetcdf", "--access", "independent"], "--access independent needs"),
    (["--mode", "serial", "--access", "independent"], "--access independent needs"),
    (["--sync", "always"], "invalid arguments"),
])
def test_bad_combinations_are_refused_with_one_line(bench, tmp_path, args, problem):
    p = mpirun(bench, *args, "--output-dir", tmp_path / "out", check=False)
    assert p.returncode != 0
    assert p.stderr.splitlines()[0].startswith(f"netcdf-output-bench: {problem}")
    assert not (tmp_path / "out").exists()
