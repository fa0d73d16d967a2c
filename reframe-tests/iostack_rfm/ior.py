"""IOR and mdtest ([POP-GBmolDD] and [IO500-OFP]): their output, and what their summaries
must show for a run to count. Standard library only.

[POP-GBmolDD] (the GBmolDD audit) found the code's one-file-per-process output spending ever more
time on metadata as the process count grew; the checks measure the same patterns with IOR
(file per process against one shared file) and mdtest (files in one directory against a
directory per process).

IOR (3.3 and 4.x) text output: the "Max Write/Max Read" lines and the "Summary of all
tests:" table, whose columns are read by the names in its header line:

    Max Write: 2345.67 MiB/sec (2459.64 MB/sec)
    Max Read:  4567.89 MiB/sec (4789.78 MB/sec)

    Summary of all tests:
    Operation   Max(MiB)   Min(MiB)  Mean(MiB)     StdDev   Max(OPs) ... Mean(s) Stonewall(s) ... API RefNum
    write        2345.67    2101.10    2230.53     100.21    2345.67 ... 0.91754         NA ... POSIX      0

mdtest "SUMMARY rate" table (mdtest 3.x and 4.x, in the IOR repository):

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

MiB = 1 << 20

# IOR

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
    def max_mib_per_s(self) -> float | None:
        return self.number("Max(MiB)")

    @property
    def mean_mib_per_s(self) -> float | None:
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


# mdtest

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


def parse_mdtest(text: str) -> MdtestResult:
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


# What a run must show

_SIZE = re.compile(r'^(\d+)([kmgt]?)$', re.I)


def size_bytes(text):
    """IOR's size syntax (1g, 512m, 47008) in bytes."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f'not an IOR size: {text!r}')
    return int(m[1]) * 1024 ** ' kmgt'.index(m[2].lower() or ' ')


def ior_problems(text, *, tasks, file_per_process, block, segments, repetitions, api):
    """Why an IOR run's summary does not show the run asked for ([] if it does)."""
    problems = []
    if re.search(r'(?im)incorrect data|^ERROR', text):
        problems.append('IOR reported data errors')
    result = parse(text)
    for op in ('write', 'read'):
        rows = result.rows(op)
        if len(rows) != 1:
            problems.append(f'{len(rows)} {op} summary rows')
            continue
        row = rows[0]
        expected = {
            '#Tasks': tasks, 'reps': repetitions, 'fPP': int(file_per_process),
            'segcnt': segments, 'blksiz': size_bytes(block),
        }
        for column, want in expected.items():
            if int(float(row.columns[column])) != want:
                problems.append(f'{op} {column}={row.columns[column]}, expected {want}')
        aggregate = tasks * segments * size_bytes(block) / MiB
        if abs(row.number('aggs(MiB)') - aggregate) > 0.05 + 1e-9 * aggregate:
            problems.append(f'{op} aggs(MiB)={row.columns["aggs(MiB)"]}, expected {aggregate:.1f}')
        if row.columns['API'].upper() != api.upper().replace('-', ''):
            problems.append(f'{op} API {row.columns["API"]}, expected {api}')
    return problems


def mdtest_problems(text, *, tasks, files_per_task, iterations,
                    operations=('File creation', 'File stat', 'File read', 'File removal')):
    problems = []
    m = re.search(r'^(\d+) tasks, (\d+) files', text, re.M)
    if not m:
        problems.append('no "N tasks, M files" line')
    elif (int(m[1]), int(m[2])) != (tasks, tasks * files_per_task):
        problems.append(f'{m[1]} tasks and {m[2]} files, expected {tasks} and '
                        f'{tasks * files_per_task}')
    result = parse_mdtest(text)
    if result.iterations != iterations:
        problems.append(f'{result.iterations} iterations summarised, expected {iterations}')
    for op in operations:
        if op not in result.rates:
            problems.append(f'no {op} rate')
        elif result.rates[op].min <= 0:
            problems.append(f'{op} rate {result.rates[op].min} in an iteration')
    return problems


def summary_value(text: str, operation: str, column: str) -> float | None:
    """A column of IOR's summary row of `operation` (write, read); None where IOR wrote NA."""
    rows = parse(text).rows(operation)
    if not rows:
        raise ValueError(f"no IOR summary row for {operation}")
    return rows[0].number(column)


def mdtest_rate(text: str, operation: str) -> float:
    """mdtest's mean rate of `operation` (e.g. File creation), ops/s."""
    return parse_mdtest(text).mean(operation)
