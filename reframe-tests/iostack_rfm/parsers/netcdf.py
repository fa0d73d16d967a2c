"""The NetCDF output benchmark's workload (src/netcdf-output-bench, [INMCM-NetCDF]): the INM RAS
atmosphere model's daily output types and grids, and what a run must therefore write.
Standard library only.

One INMCM6P day is 79,488,000 bytes of float32 values, the seed's "79.5 MB"; one INMCM6M day
311,662,080 bytes, its "312 MB".
"""
from __future__ import annotations

from dataclasses import dataclass

MODES = ("serial", "separate", "combined", "batching")


@dataclass(frozen=True)
class OutputType:
    name: str
    fields: int
    records_per_day: int
    #: "1" (a 2-D field), or the grid attribute naming its levels
    levels: str


# [INMCM-NetCDF], "Выдача модели атмосферы"
OUTPUT_TYPES = (
    OutputType("dxu", 71, 1, "1"),
    OutputType("dxyz", 7, 1, "nplevs"),
    OutputType("dxys", 10, 1, "nslevs"),
    OutputType("6h", 44, 4, "1"),
    OutputType("3h", 37, 8, "1"),
    OutputType("1h", 2, 24, "1"),
)


@dataclass(frozen=True)
class Grid:
    nlat: int
    nlon: int
    nplevs: int
    nslevs: int

    def levels(self, output_type: OutputType) -> int:
        return 1 if output_type.levels == "1" else getattr(self, output_type.levels)


GRIDS = {
    "inmcm6p": Grid(120, 180, 17, 21),
    "inmcm6m": Grid(180, 288, 26, 73),
}
FLOAT32 = 4


def fields() -> int:
    return sum(t.fields for t in OUTPUT_TYPES)


def expected_bytes(model: str, days: int) -> int:
    """Data bytes a run writes (every mode writes the same values)."""
    g = GRIDS[model]
    return days * sum(t.fields * t.records_per_day * g.levels(t) * g.nlat * g.nlon * FLOAT32
                      for t in OUTPUT_TYPES)


def expected_files(mode: str) -> int:
    """Files a mode leaves: one per field (serial, separate) or per output type."""
    if mode in ("serial", "separate"):
        return fields()
    if mode in ("combined", "batching"):
        return len(OUTPUT_TYPES)
    raise ValueError(f"unknown mode {mode!r}")


def expected_records(days: int) -> int:
    """Field records written (what --verify counts), levels not counted."""
    return days * sum(t.fields * t.records_per_day for t in OUTPUT_TYPES)
