"""The step pattern of the application checks: named, timed shell steps whose exit status
and wall time come back from the job's output (iostack_rfm.parsers.steps)."""

import pytest

from iostack_rfm.parsers import steps


def test_failed_lists_non_zero_and_missing_steps():
    text = ("iostack-step: name=a rc=0 start=1.0 end=2.0\n"
            "iostack-step: name=b rc=134 start=2.0 end=2.5\n")
    assert steps.failed(text, ["a", "b", "c"]) == ["step b exited with 134", "step c did not run"]
    assert steps.failed(text, ["a"]) == ["step b exited with 134"]
    assert steps.parse(text)["b"].seconds == pytest.approx(0.5)


def test_step_names_are_checked():
    with pytest.raises(ValueError):
        steps.timed("two words", "true")
