"""IOR and mdtest ([POP-GBmolDD] and [IO500-OFP]): their output, and what their summaries
must show for a run to count. Standard library only.

[POP-GBmolDD] (the GBmolDD audit) found the code's one-file-per-process output spending ever more
time on metadata as the process count grew; the checks measure the same patterns with IOR
(file per process against one shared file) and mdtest (files in one directory against a
directory per process).

IOR 4 writes its results as JSON (`-O summaryFormat=JSON -O summaryFile=FILE`; the JSON
replaces the text tables, and stdout keeps only the warnings and errors, e.g. "WARNING:
Incorrect data on read (1 errors found)."): `tests[].Results`, one entry per operation and
repetition, and `summary`, one row per operation with what was run:

    {"Version": "4.0.0", "tests": [{"Results": [{"access": "write", "bwMiB": 299.6574, ...},
                                                {"access": "read", ...}, ...]}],
     "summary": [{"operation": "write", "API": "POSIX", "numTasks": 2, "repetitions": 3,
                  "filePerProc": 1, "segmentCount": 1, "blockSize": 4194304,
                  "xsizeMiB": 8.0, "bwMaxMIB": ..., "bwMinMIB": ..., "bwMeanMIB": ...}, ...]}

The checks' figures are the median over the repetitions and its spread ((max - min) /
median), from the per-repetition results, not the summary's mean.

mdtest has no JSON: its "SUMMARY rate" table (mdtest 3.x and 4.x, in the IOR repository):

    SUMMARY rate (in ops/sec): (of 3 iterations)         ("SUMMARY rate: (of 3 iterations)" up to 4.0)
       Operation                     Max            Min           Mean        Std Dev
       ---------                     ---            ---           ----        -------
       File creation              5301.223       4987.101       5120.446        158.904
       File stat                 20334.871      19876.012      20101.339        229.610
       ...
       Tree creation               612.311        590.200        601.010         11.064

mdtest 3.x puts a colon after the operation name ("File creation             :").
With --show-perrank-statistics (-P) each row has three per-rank columns first; the last four
numbers are always the per-iteration Max, Min, Mean and Std Dev. Of 3 iterations the median
is 3 x Mean - Max - Min.
"""
from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass, field

MiB = 1 << 20

# IOR


@dataclass(frozen=True)
class IorRun:
    """One IOR run's JSON summary file."""

    version: str
    #: operation (write, read) -> MiB/s of each repetition, in order
    bandwidths: dict[str, list[float]]
    #: operation -> the JSON summary row
    summary: dict[str, dict]

    def median(self, operation: str) -> float:
        if not self.bandwidths.get(operation):
            raise ValueError(f"no IOR {operation} results")
        return statistics.median(self.bandwidths[operation])

    def spread(self, operation: str) -> float:
        """(max - min) / median of the repetitions' bandwidths."""
        values = self.bandwidths.get(operation) or []
        if not values:
            raise ValueError(f"no IOR {operation} results")
        return (max(values) - min(values)) / self.median(operation)


def parse(text: str) -> IorRun:
    """An IOR summary file written with `-O summaryFormat=JSON`."""
    try:
        data = json.loads(text)
        results = [r for test in data["tests"] for r in test["Results"]]
        bandwidths: dict[str, list[float]] = {}
        for r in results:
            bandwidths.setdefault(r["access"], []).append(float(r["bwMiB"]))
        return IorRun(str(data["Version"]), bandwidths,
                      {row["operation"]: row for row in data.get("summary", [])})
    except json.JSONDecodeError as e:
        raise ValueError(f"not IOR's JSON summary: {e}") from None
    except (KeyError, TypeError) as e:
        raise ValueError(f"IOR's JSON summary lacks {e}") from None


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

    def median(self, operation: str) -> float:
        """The median iteration's rate: of 1 or 3 iterations, what the table determines
        (3 x mean - max - min); other counts have no median in the table."""
        rate = self.rates[operation]
        if self.iterations == 1:
            return rate.mean
        if self.iterations == 3:
            return 3 * rate.mean - rate.max - rate.min
        raise ValueError(f"the median of {self.iterations} mdtest iterations is not in its "
                         "summary: run 3")


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


def ior_problems(summary_json, output, *, tasks, file_per_process, block, segments,
                 repetitions, api):
    """Why an IOR run does not show the run asked for ([] if it does): `summary_json` is its
    `-O summaryFile`, `output` what it printed."""
    problems = []
    if re.search(r'(?im)incorrect data|^ERROR', output):
        problems.append('IOR reported data errors')
    try:
        run = parse(summary_json)
    except ValueError as e:
        return problems + [str(e)]
    for op in ('write', 'read'):
        row = run.summary.get(op)
        if row is None:
            problems.append(f'no {op} summary')
            continue
        expected = {'numTasks': tasks, 'repetitions': repetitions,
                    'filePerProc': int(file_per_process), 'segmentCount': segments,
                    'blockSize': size_bytes(block)}
        for key, want in expected.items():
            if row.get(key) != want:
                problems.append(f'{op} {key}={row.get(key)}, expected {want}')
        aggregate = tasks * segments * size_bytes(block) / MiB
        if abs(float(row.get('xsizeMiB', -1)) - aggregate) > 0.05 + 1e-9 * aggregate:
            problems.append(f'{op} xsizeMiB={row.get("xsizeMiB")}, expected {aggregate:.1f}')
        if str(row.get('API', '')).upper() != api.upper().replace('-', ''):
            problems.append(f'{op} API {row.get("API")}, expected {api}')
        if len(run.bandwidths.get(op, [])) != repetitions:
            problems.append(f'{len(run.bandwidths.get(op, []))} {op} results, expected '
                            f'{repetitions}')
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


def median_bandwidth(summary_json: str, operation: str) -> float:
    """IOR's median MiB/s of `operation` (write, read) over the repetitions."""
    return parse(summary_json).median(operation)


def bandwidth_spread(summary_json: str, operation: str) -> float:
    return parse(summary_json).spread(operation)


def mdtest_rate(text: str, operation: str) -> float:
    """mdtest's median rate of `operation` (e.g. File creation) over its iterations, ops/s."""
    return parse_mdtest(text).median(operation)


def mdtest_spread(text: str, operation: str) -> float:
    """(max - min) / median of `operation`'s rate over the iterations."""
    rate = parse_mdtest(text).rates[operation]
    return (rate.max - rate.min) / parse_mdtest(text).median(operation)
