"""parsed(), the one way the checks read a file of their job: a reader of iostack_rfm on the
file's text, deferred to the sanity or performance phase, a reader's error naming the
file."""
import pytest
import reframe.utility.sanity as sn
from reframe.core.exceptions import SanityError

from iostack_rfm.parsers import steps
from iostack_rfm.base import parsed


def test_a_reader_gets_the_text_and_a_list_of_paths_gives_a_list_of_texts(tmp_path):
    (tmp_path / "a").write_text("iostack-step: name=x rc=0 start=1.0 end=3.5\n")
    (tmp_path / "b").write_text("two\n")
    seconds = parsed(steps.seconds, str(tmp_path / "a"), name="x")
    assert sn.evaluate(seconds) == pytest.approx(2.5)
    both = parsed(lambda first, rest: (first, rest), str(tmp_path / "a"),
                  [str(tmp_path / "b"), str(tmp_path / "b")])
    first, rest = sn.evaluate(both)
    assert first.startswith("iostack-step:") and rest == ["two\n", "two\n"]


def test_nothing_is_read_before_evaluation_and_a_reader_error_names_the_file(tmp_path):
    out = tmp_path / "job.out"
    deferred = parsed(steps.seconds, str(out), name="solve")   # the file does not exist yet
    out.write_text("iostack-step: name=mesh rc=0 start=1.0 end=2.0\n")
    with pytest.raises(SanityError, match=r"job\.out: seconds: step solve did not run"):
        sn.evaluate(deferred)
