"""IOR (3.3 and 4.x) text output: the "Max Write/Max Read" lines and the
"Summary of all tests:" table, whose columns are read by the names in its header line:

    Max Write: 2345.67 MiB/sec (2459.64 MB/sec)
    Max Read:  4567.89 MiB/sec (4789.78 MB/sec)

    Summary of all tests:
    Operation   Max(MiB)   Min(MiB)  Mean(MiB)     StdDev   Max(OPs) ... Mean(s) Stonewall(s) ... API RefNum
    write        2345.67    2101.10    2230.53     100.21    2345.67 ... 0.91754         NA ... POSIX      0
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_MAX = re.compile(rf"^Max (?P<op>Write|Read):\s+(?P<mib>{_NUMBER}) MiB/sec \((?P<mb>{_NUMBER}) MB/sec\)")


@dataclass(frozen=True)
class SummaryRow:
    operation: str                  # "write" or "read"
    columns: dict[str, str]         # column name -> text, e.g. "Max(MiB)" -> "2345.67"

    def number(self, column: str) -> float | None:
        """A column as a float; None for "NA" (stonewall columns without stonewalling)."""
        text = self.columns[column]
        return None if text == "NA" else float(text)

    @property
    def max_mib_per_s(self) -> float:
        return self.number("Max(MiB)")

    @property
    def mean_mib_per_s(self) -> float:
        return self.number("Mean(MiB)")

    @property
    def tasks(self) -> int:
        return int(self.columns["#Tasks"])


@dataclass
class IORResult:
    max_write_mib_per_s: float | None = None
    max_read_mib_per_s: float | None = None
    summary: list[SummaryRow] = field(default_factory=list)

    def rows(self, operation: str) -> list[SummaryRow]:
        return [r for r in self.summary if r.operation == operation]


def _column_names(header: list[str]) -> list[str]:
    """Header words as column names; the two "StdDev" columns become "StdDev(MiB)" and
    "StdDev(OPs)" after the unit of the column before each."""
    names = []
    for i, word in enumerate(header):
        if header.count(word) > 1 and i > 0 and (unit := re.search(r"\(\w+\)$", header[i - 1])):
            word += unit.group(0)
        names.append(word)
    return names


def parse(text: str) -> IORResult:
    result = IORResult()
    lines = text.splitlines()
    for line in lines:
        if m := _MAX.match(line.strip()):
            # one such line per test: keep the best
            value = float(m["mib"])
            if m["op"] == "Write":
                result.max_write_mib_per_s = max(value, result.max_write_mib_per_s or value)
            else:
                result.max_read_mib_per_s = max(value, result.max_read_mib_per_s or value)

    for i, line in enumerate(lines):
        if not line.startswith("Summary of all tests:"):
            continue
        header = None
        for row in lines[i + 1:]:
            words = row.split()
            if header is None:
                if words[:1] == ["Operation"]:
                    header = _column_names(words)
                continue
            if not words or words[0] not in ("write", "read"):
                break
            if len(words) != len(header):
                raise ValueError(f"IOR summary row has {len(words)} columns, header {len(header)}")
            result.summary.append(SummaryRow(words[0], dict(zip(header, words, strict=True))))
    return result
