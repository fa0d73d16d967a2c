"""IO500 ([IO500-OFP]): the ini file a run is configured with, generated from the check's
parameters; io500's output, its score, and what makes a run's result count. Standard
library only.

io500 reads one ini file ([global], [debug], one section per benchmark; `io500 --list`
prints every option). The options set here are the ones a regression has to choose: where
the data goes, the stonewall time (a phase's writes or creates stop after it; the list's
rules want 300 s, io500 marks shorter runs [INVALID]) and the sizes that let a phase last
that long. Everything else keeps io500's defaults, which are the rules' (IOR hard's 47,008
byte transfers, mdtest hard's 3,901-byte files).

io500's output: the per-phase result lines, the score line, and the score itself.

The score is sqrt(geomean(bandwidths in GiB/s) * geomean(metadata rates in kIOPS)). The
first list (SC17, [IO500-OFP]) had 4 bandwidth phases (ior easy/hard write/read) and 8
metadata phases (mdtest easy/hard create, stat, delete, hard read, and find); today's
io500 runs the same 12 in standard mode and adds optional phases (ior-rnd*, find-easy,
find-hard, mdworkbench-*) in extended mode, scored separately as [SCOREX].

Formats read:

  io500 application (2020 on)
    [RESULT]       ior-easy-write        1.234567 GiB/s : time 300.120 seconds
    [RESULT]     mdtest-easy-stat       35.714169 kIOPS : time 82.155 seconds [INVALID]
    [      ]   mdworkbench-create       12.000000 kIOPS : time 30.000 seconds   (not scored)
    [RESULT-invalid] ...                                                   (2020 releases)
    [SCORE ] Bandwidth 1.868072 GiB/s : IOPS 22.952705 kiops : TOTAL 6.548076
    [SCOREX] ...                         ("[SCORE]" without the space before 2022)
  io500.sh (2017-2019; VI4IO/io-500-dev, utilities/io500_fixed.sh)
    [RESULT] BW   phase 1            ior_easy_write                5.140 GB/s : time 317.58 seconds
    [RESULT-invalid] IOPS phase 2    mdtest_hard_write             1.862 kiops : time 41.05 seconds
    [RESULT] IOPS phase 3                      find               47.880 kiops : time 42.28 seconds
    One or more test phases invalid.  Not valid for IO-500 submission.
    [SCORE-invalid] Bandwidth 1.4117 GB/s : IOPS 7.5556 kiops : TOTAL 3.2659
  The script divided IOR's MiB/s by 1024 yet printed "GB/s": those numbers are GiB/s. Its
  score tag is "[SCORE" + a suffix + "]"; published outputs carry "-invalid" and "-valid".
  A line saying the run is not valid (a skipped phase, a write phase shorter than the
  rules allow) makes the run invalid whatever its tags say. Before VI4IO/io-500-dev
  7a7ea78 (2018-05-09, "Fixed score computed to sqrt") its TOTAL was BW x MD, not the
  square root of it; `total_formula` says which one a printed score used.

Numbers keep the text they were printed with, so a recomputed score can be compared with
the printed one to within the rounding of every printed input rather than a guessed
tolerance.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Iterable

BANDWIDTH = "GiB/s"
METADATA = "kIOPS"

STANDARD_BANDWIDTH_PHASES = ("ior-easy-write", "ior-hard-write", "ior-easy-read", "ior-hard-read")
STANDARD_METADATA_PHASES = (
    "mdtest-easy-write", "mdtest-hard-write", "find", "mdtest-easy-stat",
    "mdtest-hard-stat", "mdtest-easy-delete", "mdtest-hard-read", "mdtest-hard-delete",
)

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_RESULT = re.compile(
    rf"^\s*\[(?P<tag>RESULT|RESULT-invalid| {{6}})\]\s+(?P<name>[A-Za-z][\w-]*)\s+"
    rf"(?P<value>{_NUMBER})\s+(?P<unit>GiB/s|kIOPS)\s*:\s*time\s+(?P<seconds>{_NUMBER})\s+seconds"
    r"(?P<invalid>\s*\[INVALID\])?"
)
_RESULT_2017 = re.compile(
    rf"^\s*\[(?P<tag>RESULT|RESULT-invalid)\]\s+(?P<kind>BW|IOPS)\s+phase\s+\d+\s+(?P<name>[A-Za-z][\w-]*)\s+"
    rf"(?P<value>{_NUMBER})\s+(?P<unit>GB/s|GiB/s|kiops)\s*:\s*time\s+(?P<seconds>{_NUMBER})\s+seconds"
)
_SCORE = re.compile(
    rf"^\s*\[(?P<tag>SCORE ?|SCOREX|SCORE-\w+)\]\s+Bandwidth\s+(?P<bw>{_NUMBER})\s+(?:GiB/s|GB/s)\s*:\s*"
    rf"IOPS\s+(?P<md>{_NUMBER})\s+(?:kiops|kIOPS)\s*:\s*TOTAL\s+(?P<total>{_NUMBER})"
    r"(?P<invalid>\s*\[INVALID\])?"
)


# io500.sh's own words for a run that does not count
_DECLARED_INVALID = re.compile(
    r"^\s*(?P<line>One or more test phases invalid.*|.* skipped\. Aggregate score is not valid\.)\s*$")


class ScoreMismatch(ValueError):
    """A printed score that its printed phases cannot produce, whatever their rounding."""


@dataclass(frozen=True)
class Reading:
    """A number as printed: its value and the interval its rounding leaves open."""

    text: str

    @property
    def value(self) -> float:
        return float(self.text)

    @property
    def half_step(self) -> float:
        mantissa, _, exponent = self.text.lower().partition("e")
        decimals = len(mantissa.partition(".")[2])
        return 0.5 * 10.0 ** (-decimals + (int(exponent) if exponent else 0))

    @property
    def lower(self) -> float:
        return self.value - self.half_step

    @property
    def upper(self) -> float:
        return self.value + self.half_step


@dataclass(frozen=True)
class Phase:
    name: str            # io500 spelling with hyphens, e.g. "ior-easy-write"
    value: Reading
    unit: str            # BANDWIDTH or METADATA
    seconds: float
    scored: bool         # counted in a score ("[RESULT]" rather than "[      ]")
    valid: bool


@dataclass(frozen=True)
class Score:
    bandwidth: Reading   # geomean of bandwidth phases, GiB/s
    metadata: Reading    # geomean of metadata phases, kIOPS
    total: Reading
    valid: bool


@dataclass
class IO500Result:
    phases: dict[str, Phase] = field(default_factory=dict)
    score: Score | None = None
    extended_score: Score | None = None
    #: "io500.sh" (2017-2019) or "io500" (the application, 2020 on)
    generator: str = "io500"
    #: the lines in which the run says it does not count
    declared_invalid: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return (self.score is not None and self.score.valid and not self.declared_invalid
                and all(p.valid for p in self.phases.values() if p.scored))


def _normalise(name: str) -> str:
    return name.replace("_", "-")


def parse(text: str) -> IO500Result:
    """Phases and scores from io500's stdout (or result_summary.txt) of any version above."""
    result = IO500Result()
    for line in text.splitlines():
        if m := _RESULT.match(line):
            tag = m["tag"]
            result.phases[m["name"]] = Phase(
                m["name"], Reading(m["value"]), m["unit"], float(m["seconds"]),
                scored=tag != " " * 6,
                valid=tag != "RESULT-invalid" and not m["invalid"],
            )
        elif m := _RESULT_2017.match(line):
            unit = BANDWIDTH if m["kind"] == "BW" else METADATA
            name = _normalise(m["name"])
            result.generator = "io500.sh"
            result.phases[name] = Phase(name, Reading(m["value"]), unit, float(m["seconds"]),
                                        scored=True, valid=m["tag"] == "RESULT")
        elif m := _DECLARED_INVALID.match(line):
            result.declared_invalid.append(m["line"].strip())
        elif m := _SCORE.match(line):
            score = Score(Reading(m["bw"]), Reading(m["md"]), Reading(m["total"]),
                          valid=not m["invalid"] and m["tag"] != "SCORE-invalid")
            if m["tag"] == "SCOREX":
                result.extended_score = score
            else:
                result.score = score
    return result


def geometric_mean(values: Iterable[float]) -> float:
    """Geometric mean of the positive values: io500 leaves out phases that scored 0."""
    positive = [v for v in values if v > 0]
    if not positive:
        return 0.0
    return math.exp(math.fsum(math.log(v) for v in positive) / len(positive))


def total_score(bandwidth: float, metadata: float) -> float:
    return math.sqrt(bandwidth * metadata)


def score(bandwidths: Iterable[float], rates: Iterable[float]) -> tuple[float, float, float]:
    """(bandwidth score, metadata score, total) from phase values in GiB/s and kIOPS."""
    bw, md = geometric_mean(bandwidths), geometric_mean(rates)
    return bw, md, total_score(bw, md)


def scored_phases(result: IO500Result, extended: bool = False) -> tuple[list[Phase], list[Phase]]:
    """Bandwidth and metadata phases entering the standard (or extended) score."""
    if extended:
        chosen = [p for p in result.phases.values() if p.scored]
    else:
        chosen = [result.phases[n] for n in STANDARD_BANDWIDTH_PHASES + STANDARD_METADATA_PHASES
                  if n in result.phases]
    return ([p for p in chosen if p.unit == BANDWIDTH],
            [p for p in chosen if p.unit == METADATA])


def _overlaps(low: float, high: float, printed: Reading) -> bool:
    slack = 1e-12 * max(abs(high), 1.0)     # float noise, far below any printed digit
    return low - slack <= printed.upper and high + slack >= printed.lower


def check_total(bandwidth: str, metadata: str, total: str) -> float:
    """Check a printed total against printed bandwidth and metadata scores (e.g. a table
    in a paper); return the total recomputed from the printed values."""
    bw, md, tot = Reading(bandwidth), Reading(metadata), Reading(total)
    low = total_score(max(bw.lower, 0.0), max(md.lower, 0.0))
    high = total_score(bw.upper, md.upper)
    if not _overlaps(low, high, tot):
        raise ScoreMismatch(f"TOTAL {total} cannot come from bandwidth {bandwidth} and "
                            f"metadata {metadata} (gives {low:.6f}..{high:.6f})")
    return total_score(bw.value, md.value)


def check_score(result: IO500Result, extended: bool = False) -> Score:
    """Recompute the score from the phases and compare it with io500's own score line;
    raise ScoreMismatch if they differ by more than the printed rounding allows."""
    printed = result.extended_score if extended else result.score
    if printed is None:
        raise ScoreMismatch("no [SCOREX] line" if extended else "no [SCORE] line")
    bandwidth, metadata = scored_phases(result, extended)
    # io500 leaves phases that scored 0 out of the means
    bandwidth = [p for p in bandwidth if p.value.value > 0]
    metadata = [p for p in metadata if p.value.value > 0]
    if not bandwidth or not metadata:
        raise ScoreMismatch("no scored bandwidth or metadata phases")
    # every score is increasing in every phase value, so the bounds of the inputs
    # give the bounds of the output
    bw_low = geometric_mean(max(p.value.lower, 1e-300) for p in bandwidth)
    bw_high = geometric_mean(p.value.upper for p in bandwidth)
    md_low = geometric_mean(max(p.value.lower, 1e-300) for p in metadata)
    md_high = geometric_mean(p.value.upper for p in metadata)
    checks = (
        ("bandwidth", bw_low, bw_high, printed.bandwidth),
        ("metadata", md_low, md_high, printed.metadata),
    )
    for what, low, high, shown in checks:
        if not _overlaps(low, high, shown):
            raise ScoreMismatch(f"{what} score printed as {shown.text}, phases give "
                                f"{low:.6f}..{high:.6f}")
    if _total_formula(result, printed, (bw_low, bw_high), (md_low, md_high)) is None:
        raise ScoreMismatch(f"total score printed as {printed.total.text}, phases give "
                            f"{total_score(bw_low, md_low):.6f}..{total_score(bw_high, md_high):.6f}")
    return printed


def _total_formula(result: IO500Result, printed: Score, bw: tuple[float, float],
                   md: tuple[float, float]) -> str | None:
    """"sqrt" when the printed total is sqrt(BW x MD) of the given bounds, "product" when
    it is BW x MD in io500.sh's output (before 2018-05-09), else None."""
    if _overlaps(total_score(bw[0], md[0]), total_score(bw[1], md[1]), printed.total):
        return "sqrt"
    if result.generator == "io500.sh" and _overlaps(bw[0] * md[0], bw[1] * md[1], printed.total):
        return "product"
    return None


def total_formula(result: IO500Result) -> str | None:
    """How the printed TOTAL follows from the printed bandwidth and metadata scores:
    "sqrt" (the rules), "product" (io500.sh before VI4IO/io-500-dev 7a7ea78), or None when
    it follows from neither."""
    score = check_score(result)
    bw, md = score.bandwidth, score.metadata
    return _total_formula(result, score, (bw.lower, bw.upper), (md.lower, md.upper))


# The check's run

#: the rules' minimum for a valid (listable) run
RULES_STONEWALL_SECONDS = 300
#: the 12 phases of the score, in io500's order of names
PHASES = STANDARD_BANDWIDTH_PHASES + STANDARD_METADATA_PHASES


@dataclass
class IO500Config:
    datadir: str
    resultdir: str = "./results"
    stonewall_seconds: int = RULES_STONEWALL_SECONDS
    api: str = "POSIX"
    #: IOR easy: block per process, large enough not to end before the stonewall
    ior_easy_block: str = "9920000m"
    ior_easy_transfer: str = "2m"
    ior_hard_segments: int = 10_000_000
    mdtest_easy_files: int = 1_000_000
    mdtest_hard_files: int = 1_000_000
    verbosity: int = 1
    #: further options, {section: {key: value}}
    extra: dict[str, dict[str, str]] = field(default_factory=dict)

    def sections(self) -> dict[str, dict[str, str]]:
        sections = {
            "global": {
                "datadir": self.datadir,
                "timestamp-datadir": "FALSE",
                "resultdir": self.resultdir,
                "timestamp-resultdir": "FALSE",
                "api": self.api,
                "drop-caches": "FALSE",
                "verbosity": str(self.verbosity),
            },
            "debug": {"stonewall-time": str(self.stonewall_seconds)},
            "ior-easy": {"API": self.api, "transferSize": self.ior_easy_transfer,
                         "blockSize": self.ior_easy_block, "filePerProc": "TRUE"},
            "mdtest-easy": {"API": self.api, "n": str(self.mdtest_easy_files)},
            "ior-hard": {"API": self.api, "segmentCount": str(self.ior_hard_segments)},
            "mdtest-hard": {"API": self.api, "n": str(self.mdtest_hard_files)},
            "find": {},
        }
        for section, options in self.extra.items():
            sections.setdefault(section, {}).update(options)
        return sections

    def render(self) -> str:
        lines = ["# written by iostack_rfm.parsers.io500 for the IO500 check"]
        for section, options in self.sections().items():
            lines.append(f"[{section}]")
            lines += [f"{key} = {value}" for key, value in options.items()]
            lines.append("")
        return "\n".join(lines)

    @property
    def follows_rules(self) -> bool:
        return self.stonewall_seconds >= RULES_STONEWALL_SECONDS


def score_problems(text: str) -> list[str]:
    """[] when io500's output has a [RESULT] for each of the 12 scored phases and its
    [SCORE] follows from them (within the printed rounding), else why not."""
    run = parse(text)
    missing = [p for p in PHASES if p not in run.phases]
    if missing:
        return [f"no [RESULT] for {', '.join(missing)}"]
    try:
        check_score(run)
    except ScoreMismatch as e:
        return [str(e)]
    return []


def invalid_parts(text: str) -> list[str]:
    """Scored phases io500 marked invalid, `score` if the score is (or is missing), and
    `run: <line>` for each line in which the run says it does not count."""
    run = parse(text)
    bad = [p.name for p in run.phases.values() if p.scored and not p.valid]
    if run.score is None or not run.score.valid:
        bad.append("score")
    return bad + [f"run: {line}" for line in run.declared_invalid]


def phase_value(text: str, name: str) -> float:
    return parse(text).phases[name].value.value


def score_value(text: str, which: str) -> float:
    """The printed score's `total`, `bandwidth` or `metadata`."""
    score = parse(text).score
    if score is None:
        raise ValueError("no [SCORE] line")
    return getattr(score, which).value
