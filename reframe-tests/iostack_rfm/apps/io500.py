"""IO500 (seed 004): the ini file a run is configured with, generated from the check's
parameters. Standard library only.

io500 reads one ini file ([global], [debug], one section per benchmark; `io500 --list`
prints every option). The options set here are the ones a regression has to choose: where
the data goes, the stonewall time (a phase's writes or creates stop after it; the list's
rules want 300 s, io500 marks shorter runs [INVALID]) and the sizes that let a phase last
that long. Everything else keeps io500's defaults, which are the rules' (IOR hard's 47,008
byte transfers, mdtest hard's 3,901-byte files).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from iostack_rfm.parsers import io500 as parser

#: the rules' minimum for a valid (listable) run
RULES_STONEWALL_SECONDS = 300
#: the 12 phases of the score, in io500's order of names
PHASES = parser.STANDARD_BANDWIDTH_PHASES + parser.STANDARD_METADATA_PHASES


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
        lines = ["# written by iostack_rfm.apps.io500 for the IO500 check"]
        for section, options in self.sections().items():
            lines.append(f"[{section}]")
            lines += [f"{key} = {value}" for key, value in options.items()]
            lines.append("")
        return "\n".join(lines)

    @property
    def follows_rules(self) -> bool:
        return self.stonewall_seconds >= RULES_STONEWALL_SECONDS


def parse_ini(text: str) -> dict[str, dict[str, str]]:
    """Sections and options of an io500 ini (what io500's own parser accepts: `key = value`,
    `#` comments)."""
    sections: dict[str, dict[str, str]] = {}
    current = None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1].strip(), {})
        elif "=" in line and current is not None:
            key, value = (s.strip() for s in line.split("=", 1))
            current[key] = value
        else:
            raise ValueError(f"not an io500 ini line: {raw!r}")
    return sections


def score_problems(text: str) -> list[str]:
    """[] when io500's output has a [RESULT] for each of the 12 scored phases and its
    [SCORE] follows from them (within the printed rounding), else why not."""
    run = parser.parse(text)
    missing = [p for p in PHASES if p not in run.phases]
    if missing:
        return [f"no [RESULT] for {', '.join(missing)}"]
    try:
        parser.check_score(run)
    except parser.ScoreMismatch as e:
        return [str(e)]
    return []


def invalid_parts(text: str) -> list[str]:
    """Scored phases io500 marked invalid, and `score` if the score is (or is missing)."""
    run = parser.parse(text)
    bad = [p.name for p in run.phases.values() if p.scored and not p.valid]
    if run.score is None or not run.score.valid:
        bad.append("score")
    return bad
