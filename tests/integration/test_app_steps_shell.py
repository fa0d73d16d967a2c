"""The step lines iostack_rfm.parsers.steps writes, run by bash as a job script runs them."""
import subprocess
import time

from iostack_rfm.parsers import steps


def run_script(lines):
    return subprocess.run(["bash", "-c", "\n".join(lines)], capture_output=True, text=True).stdout


def test_a_step_reports_rc_and_wall_time_and_keeps_the_shell_state(tmp_path):
    before = time.time()
    out = run_script([
        f"cd {tmp_path}",
        steps.timed("enter", "mkdir sub && cd sub && export MARK=here"),
        steps.timed("sleep", "sleep 0.2"),
        steps.timed("fail", "false"),
        'echo "pwd=$PWD mark=$MARK"',
    ])
    found = steps.parse(out)
    assert list(found) == ["enter", "sleep", "fail"]
    assert found["enter"].rc == 0 and found["fail"].rc == 1
    after = time.time()
    # `sleep 0.2` lasts at least 0.2 s, and the step lies within the script's own run: bounds
    # that hold on any machine (the margin: two epoch times parsed as floats, ~0.25 µs each)
    assert found["sleep"].seconds >= 0.2 - 1e-6
    assert before - 1e-6 <= found["enter"].start <= found["sleep"].start
    assert found["sleep"].end <= found["fail"].end <= after + 1e-6
    # a step runs in the job's shell: cd and exports carry on, a failure does not stop it
    assert f"pwd={tmp_path}/sub mark=here" in out
