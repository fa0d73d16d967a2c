"""FDB throughput ([OIFS-HECToR]'s FDB tuning): what fdb-hammer and fio report for each repetition
of the check's measurement (iostack_rfm/templates/fdb-throughput.sh). Standard library only.

Each repetition writes hammer-write-N.out (fdb-hammer --statistics: `Name: value` lines)
and fio-write-N.json (fio's JSON output); the check's figures are medians over them.
"""
from __future__ import annotations

import json
import math
import re
import statistics

MiB = 1024 * 1024


def hammer_stats(texts: list[str], name: str) -> list[float]:
    """A `Name: value` statistic of each repetition's fdb-hammer output (nan where absent)."""
    values = []
    for text in texts:
        m = re.search(rf'^{re.escape(name)}:\s*(\S+)', text, re.MULTILINE)
        values.append(float(m.group(1)) if m else math.nan)
    return values


def fio_write(text: str) -> dict:
    """The write statistics of fio's (first) job."""
    return json.loads(text)['jobs'][0]['write']


def hammer_write_bandwidths(texts: list[str]) -> list[float]:
    """MiB/s of each repetition's archive+flush (fdb-hammer's GRIB encoding excluded)."""
    return [b / t / MiB for b, t in zip(hammer_stats(texts, 'Bytes written'),
                                        hammer_stats(texts, 'Writing duration'), strict=True)]


def raw_write_bandwidths(texts: list[str]) -> list[float]:
    """MiB/s of each repetition's fio write (fsync included)."""
    return [fio_write(t)['bw_bytes'] / MiB for t in texts]


def median_fdb_write_bw(hammer_texts: list[str]) -> float:
    return statistics.median(hammer_write_bandwidths(hammer_texts))


def median_raw_write_bw(fio_texts: list[str]) -> float:
    return statistics.median(raw_write_bandwidths(fio_texts))


def median_write_ratio(hammer_texts: list[str], fio_texts: list[str]) -> float:
    """Median of FDB over raw for each repetition: each FDB run against the fio run just
    before it, so both saw the same background load."""
    return statistics.median(f / r for f, r in zip(hammer_write_bandwidths(hammer_texts),
                                                   raw_write_bandwidths(fio_texts), strict=True))


def written_bytes_problems(hammer_texts: list[str], fio_texts: list[str]) -> list[str]:
    """[] when fio wrote as many bytes as fdb-hammer archived (every repetition alike)."""
    archived = set(hammer_stats(hammer_texts, 'Bytes written'))
    raw = {fio_write(t)['io_bytes'] for t in fio_texts}
    if raw == archived:
        return []
    return [f'fio wrote {sorted(raw)} bytes, fdb-hammer archived {sorted(archived)}']
