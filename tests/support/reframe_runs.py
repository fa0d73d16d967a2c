"""Real ReFrame runs of the tiny checks in tests/data/reframe, the way the ReFrame set-up
installs runs them (the repository's configuration, system `local`), and the recipes of the
run reports kept there for the unit tests: each report is what one of these runs wrote,
unchanged. tests/integration/test_reframe_report_data.py runs the recipes again and
compares; IOSTACK_REGENERATE_REPORTS=1 rewrites the kept files."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
from typing import NamedTuple

from iostack.core import paths
from iostack.regression import reframe, results
from support import targets

DATA = paths.REPO / "tests" / "data" / "reframe"
#: the references the checks of report_checks.py take (IostackMixin reads them)
REFERENCES = DATA / "references"
#: the kept reports of report_checks.py, and ReFrame's comparison of the series
KEPT = DATA / "report"


def run_checks(work: pathlib.Path, check_file: pathlib.Path, options=(), name="run-report",
               root: pathlib.Path | None = None, release: pathlib.Path | None = None) -> dict:
    """A real `reframe -r` of `check_file` on system `local` with `options` (its session
    stored in the results DB of deployment `root`, default work/root, testing `release` if
    given); its JSON run report."""
    root = root or work / "root"
    report = work / f"{name}.json"
    target = targets.of(root, release=release, IOSTACK_RFM_REFERENCES=REFERENCES)
    env = {**os.environ, **{k: str(v) for k, v in reframe.environment(target).items()}}
    p = subprocess.run([str(targets.settings().venv / "bin" / "reframe"), "-C", str(paths.reframe_config("local")),
                        "--system", "local", "--prefix", str(work / "out" / name),
                        "-c", str(check_file), "-r", "--report-file", str(report), *options],
                       capture_output=True, text=True, env=env, cwd=work, timeout=600)
    assert report.is_file(), p.stdout[-3000:] + p.stderr[-2000:]
    return json.loads(report.read_text())


def stack(release: str, commit: str, lock: str) -> list[str]:
    """The session extras `bin/iostack nightly` gives a session on a release."""
    return ["--session-extras",
            f"site=local,commit={commit},spack_lock_sha256={lock},release={release}"]


def values(**variables) -> list[str]:
    """`-S` options: the values the checks of report_checks.py print."""
    return [a for k, v in variables.items() for a in ("-S", f"{k}={v}")]


class Recipe(NamedTuple):
    name: str
    check_file: pathlib.Path
    options: list[str]


REPORT_CHECKS = DATA / "report_checks.py"
RELEASE_A = ("20261101T020000Z-a1a1a1a1a1-3c3c3c3c3c", "a1" * 20, "3c" * 32)
RELEASE_B = ("20261102T020000Z-b2b2b2b2b2-4d4d4d4d4d", "b2" * 20, "4d" * 32)
#: (bw, ratio, release) of each night: within the bands twice on release A and once on B,
#: then out of both bands (180 to 220 MiB/s, at least 0.15) on B
SERIES = [(205.0, 0.31, RELEASE_A), (199.0, 0.3, RELEASE_A), (210.0, 0.33, RELEASE_B),
          (150.0, 0.12, RELEASE_B)]
THROUGHPUT = ["-n", "TinyThroughputCheck|TinyNewSystemCheck|TinySmokeCheck"]
#: run in this order into one results DB
RECIPES = [
    Recipe("run-report-tiny", DATA / "tiny_checks.py",
           ["--session-extras", "site=local,commit=" + "0" * 40]),
    # four nights (SERIES); TinyNewSystemCheck fails each: it has no baseline
    *(Recipe(f"series-{night}", REPORT_CHECKS,
             THROUGHPUT + values(bw=bw, ratio=ratio) + stack(*release))
      for night, (bw, ratio, release) in enumerate(SERIES, 1)),
    # sweeps within a job: both checks, then only the writers' with one more count
    Recipe("sweeps-1", REPORT_CHECKS,
           ["-n", "TinyWriterScalingCheck|TinyRankScalingCheck"]
           + values(writers="1,2", ratios="0.2,0.3") + stack(*RELEASE_A)),
    Recipe("sweeps-2", REPORT_CHECKS,
           ["-n", "TinyWriterScalingCheck"] + values(writers="1,2,4", ratios="0.5,0.7,0.6")
           + stack(*RELEASE_B)),
    # a case that fails and passes its retry
    Recipe("retry", REPORT_CHECKS, ["-n", "TinyFlakyCheck", "--max-retries", "1"]),
]
#: ReFrame's comparison of the last night with the three before, from the results DB they
#: were stored in; and of the first session with none (no earlier value: `<no data>`)
COMPARISON, FIRST_COMPARISON = "series-compare.tsv", "first-compare.tsv"


def kept_path(name: str) -> pathlib.Path:
    return DATA / f"{name}.json" if name == "run-report-tiny" else KEPT / f"{name}.json"


def anonymous(text: str, work: pathlib.Path) -> str:
    """A report as kept: this machine's checkout and work directory named by placeholders."""
    return text.replace(str(work), "<work>").replace(str(paths.REPO), "<checkout>")


def make_all(work: pathlib.Path) -> dict[pathlib.Path, str]:
    """Run every recipe (and the comparison) afresh: {kept file: what it would hold now}."""
    made: dict[pathlib.Path, str] = {}
    reports = {}
    for recipe in RECIPES:
        reports[recipe.name] = run_checks(work, recipe.check_file, recipe.options, recipe.name)
        made[kept_path(recipe.name)] = anonymous(json.dumps(reports[recipe.name], indent=1),
                                                 work) + "\n"
    series = [reports[f"series-{night}"] for night in range(1, len(SERIES) + 1)]
    target = targets.of(work / "root", IOSTACK_RFM_REFERENCES=REFERENCES)
    env = {**os.environ, **{k: str(v) for k, v in reframe.environment(target).items()}}
    for name, sessions in ((COMPARISON, series), (FIRST_COMPARISON, [reports[RECIPES[0].name]])):
        p = subprocess.run(results.comparison_command(target, sessions), capture_output=True,
                           text=True, timeout=600, env=env)
        assert p.returncode == 0, p.stdout + p.stderr
        made[KEPT / name] = p.stdout
    return made
