"""The step lines iostack_rfm.steps writes, run by bash as a job script runs them."""
import subprocess

from iostack_rfm import steps


def run_script(lines):
    return subprocess.run(["bash", "-c", "\n".join(lines)], capture_output=True, text=True).stdout


def test_a_step_reports_rc_and_wall_time_and_keeps_the_shell_state(tmp_path):
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
    assert 0.15 < found["sleep"].seconds < 2
    # a step runs in the job's shell: cd and exports carry on, a failure does not stop it
    assert f"pwd={tmp_path}/sub mark=here" in out
