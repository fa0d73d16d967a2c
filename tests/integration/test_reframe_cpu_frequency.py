"""A timed check asks for the CPU frequency its references were taken at, records the one
its job ran at, and fails when that differs ([ARCHER2-Energy]: ARCHER2 caps srun at 2.0 GHz
unless a job asks for 2.25 GHz). Real ReFrame runs on system `local` of two tiny checks
(tests/data/reframe/cpufreq_checks.py) against references recorded at 2.25 GHz."""
from __future__ import annotations

import yaml

from support import reframe_runs

CHECKS = reframe_runs.DATA / "cpufreq_checks.py"


def references_at(directory, khz):
    entry = {"value": 1.0, "lower": -0.5, "upper": None, "unit": "ratio",
             "provenance": {"recorded": "2026-11-26T00:00:00Z", "commit": "c" * 40,
                            "spack_lock_sha256": "a" * 64, "session": "s", "host": "h",
                            "cpu_freq_khz": khz}}
    section = {"thresholds": {"ratio": {"lower": -0.5, "upper": None, "unit": "ratio"}},
               "references": {"local:default+builtin": {"*": {"ratio": entry}}}}
    (directory / "cpufreq_checks.yaml").write_text(yaml.safe_dump(
        {"CpuFreqCheck": section, "CpuFreqCappedCheck": section}))


def test_a_timed_check_runs_at_its_references_frequency_and_fails_at_another(tmp_path, monkeypatch):
    refs = tmp_path / "references"
    refs.mkdir()
    references_at(refs, 2250000)
    monkeypatch.setattr(reframe_runs, "REFERENCES", refs)
    report = reframe_runs.run_checks(tmp_path, CHECKS)
    cases = {tc["name"]: tc for run in report["runs"] for tc in run["testcases"]}
    asked = cases["CpuFreqCheck"]
    assert asked["result"] == "pass", asked["fail_reason"]
    assert asked["env_vars"]["SLURM_CPU_FREQ_REQ"] == "2250000"
    # the job's own record of it, stored with the result
    assert asked["cpu_freq_requested"] == "2250000"
    assert isinstance(asked["cpu_freq_max_khz"], int)
    capped = cases["CpuFreqCappedCheck"]
    assert (capped["result"], capped["fail_phase"]) == ("fail", "performance")
    assert capped["cpu_freq_requested"] == "2000000"
    assert "were taken at 2250000 kHz (their provenance), this run asked for 2000000" in \
        capped["fail_reason"]
