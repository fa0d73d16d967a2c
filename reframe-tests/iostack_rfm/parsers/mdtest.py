"""mdtest "SUMMARY rate" table (mdtest 3.x and 4.x, in the IOR repository):

    SUMMARY rate (in ops/sec): (of 3 iterations)         ("SUMMARY rate: (of 3 iterations)" up to 4.0)
       Operation                     Max            Min           Mean        Std Dev
       ---------                     ---            ---           ----        -------
       File creation              5301.223       4987.101       5120.446        158.904
       File stat                 20334.871      19876.012      20101.339        229.610
       ...
       Tree creation               612.311        590.200        601.010         11.064

mdtest 3.x puts a colon after the operation name ("File creation             :").
With --show-perrank-statistics (-P) each row has three per-rank columns first; the last four
numbers are always the per-iteration Max, Min, Mean and Std Dev.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_SUMMARY = re.compile(r"^SUMMARY rate(?: \(in ops/sec\))?: \(of (?P<iterations>\d+) iterations?\)")
_ROW = re.compile(r"^(?P<name>[A-Za-z][A-Za-z ()]*?)\s*:?\s+(?P<numbers>[-+\d.eE\s]+)$")


@dataclass(frozen=True)
class Rate:
    max: float
    min: float
    mean: float
    stddev: float


@dataclass
class MdtestResult:
    iterations: int | None = None
    rates: dict[str, Rate] = field(default_factory=dict)   # "File creation" -> ops/s

    def mean(self, operation: str) -> float:
        return self.rates[operation].mean


def parse(text: str) -> MdtestResult:
    result = MdtestResult()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _SUMMARY.match(line.strip())
        if not m:
            continue
        result.iterations = int(m["iterations"])
        for row in lines[i + 1:]:
            stripped = row.strip()
            if stripped.startswith(("Operation", "---")):
                continue
            row_match = _ROW.match(stripped)
            if not row_match:
                if " NA " in f" {stripped} ":
                    continue    # 3.x "File create (stonewall)" row: NA where no value
                break           # blank line or the next section ends the table
            numbers = [float(x) for x in row_match["numbers"].split()]
            if len(numbers) < 4:
                break
            result.rates[row_match["name"]] = Rate(*numbers[-4:])
        break
    return result
