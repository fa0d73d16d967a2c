"""The host slot (iostack_rfm.parsers.slots) with ReFrame's async policy on `local`: timed checks
(tag `performance`) run with nothing beside them, not even a build; untimed ones still run
two at a time. Checks of this file's own, so the run takes seconds; every job's stderr
carries its slot stamps, which give the intervals compared. Where a test needs jobs side by
side, they meet (the first waits until a second has started) rather than sleep and hope.
Without the timed checks' hook (`--disable-hook`), timed jobs have company: the test can
fail."""
import os
import shutil
import subprocess
import textwrap

import pytest

from iostack.core import paths
from iostack.regression import reframe
from iostack_rfm.parsers import slots
from support import targets

pytestmark = pytest.mark.skipif(not shutil.which("flock"), reason="flock (util-linux) missing")

CHECKS = textwrap.dedent("""
    import shlex

    import reframe as rfm
    from reframe.core.builtins import parameter, run_before, sanity_function, variable
    import reframe.utility.sanity as sn
    from iostack_rfm.base import IostackMixin


    class Sleep(rfm.CompileOnlyRegressionTest):
        build_system = 'SingleSource'
        sourcepath = 'true.c'
        valid_systems = ['local']
        valid_prog_environs = ['*']

        @run_before('compile')
        def write_source(self):
            self.prebuild_cmds = ['sleep 1', 'echo "int main(void){return 0;}" > true.c']

        @sanity_function
        def built(self):
            return sn.assert_true(1)


    class Job(IostackMixin, rfm.RunOnlyRegressionTest):
        valid_systems = ['local']
        valid_prog_environs = ['*']
        executable = 'sleep'
        executable_opts = ['1.5']
        #: wait until this many jobs of the class have started (side by side by
        #: construction, however slow the machine), instead of sleeping
        partners = variable(int, value=0)

        @run_before('run')
        def meet(self):
            if self.partners:
                met = f'@RENDEZVOUS@/{type(self).__name__}'
                self.executable = 'bash'
                self.executable_opts = [shlex.quote(
                    f'mkdir -p {met} && touch {met}/$$ && end=$((SECONDS + 600)) && '
                    f'while [ "$(ls {met} | wc -l)" -lt {self.partners} ]; do '
                    f'[ $SECONDS -lt $end ] || exit 1; sleep 0.1; done')]
                self.executable_opts.insert(0, '-c')

        @sanity_function
        def ran(self):
            return sn.assert_true(1)


    @rfm.simple_test
    class TimedJob(Job):
        n = parameter([1, 2, 3])
        tags = {'performance'}


    @rfm.simple_test
    class UntimedJob(Job):
        n = parameter([1, 2, 3])


    @rfm.simple_test
    class BuildingJob(Job):
        build = rfm.core.builtins.fixture(Sleep, scope='test')
    """)


def run(tmp_path, *extra):
    (tmp_path / "checks").mkdir(exist_ok=True)
    (tmp_path / "checks" / "slot_checks.py").write_text(
        CHECKS.replace("@RENDEZVOUS@", str(tmp_path / "rendezvous")))
    root = tmp_path / "root"
    env = {**os.environ, **{k: str(v) for k, v in reframe.environment(targets.of(root)).items()}}
    p = subprocess.run(
        [str(targets.settings().venv / "bin" / "reframe"), "-C", str(paths.reframe_config("local")), "--system",
         "local", "--prefix", str(root / "reframe"), "-c", str(tmp_path / "checks"), "-r",
         "--exec-policy=async", "--keep-stage-files", "-p", "builtin", *extra],
        capture_output=True, text=True, env=env, timeout=300)
    print(p.stdout[-3000:], p.stderr[-2000:])
    assert p.returncode == 0
    stderrs = {}
    for path in (root / "reframe" / "stage").rglob("rfm_*.err"):
        stderrs[f"{path.parent.name}/{path.name}"] = path.read_text()
    return stderrs


def test_timed_jobs_run_alone_and_untimed_ones_together(tmp_path):
    stderrs = run(tmp_path)
    timed = [n for n in stderrs if n.startswith("TimedJob")]
    # 3 timed, 3 untimed, one building check and its build
    assert len(timed) == 3 and len(stderrs) == 8, sorted(stderrs)
    for name in timed:
        assert [s[0] for s in slots.held(stderrs[name])] == ["shared", "exclusive"], name
    assert all(slots.held(t) for t in stderrs.values())
    assert slots.company(stderrs, timed) == []


def overlapping(stderrs) -> bool:
    spans = [span for text in stderrs.values() for span in slots.held(text)]
    return any(a is not b and a[1] < b[2] and b[1] < a[2] for a in spans for b in spans)


def test_the_slot_does_not_serialise_untimed_jobs(tmp_path):
    """The first untimed job waits until a second has started: they overlap if ReFrame
    runs them side by side, whatever the machine's speed (else the wait runs out)."""
    stderrs = run(tmp_path, "-n", "UntimedJob", "-S", "UntimedJob.partners=2")
    assert len(stderrs) == 3 and overlapping(stderrs)


def test_without_the_timed_hook_timed_jobs_have_company(tmp_path):
    stderrs = run(tmp_path, "--disable-hook=take_the_host_when_timed", "-n", "TimedJob",
                  "-S", "TimedJob.partners=2")
    timed = [n for n in stderrs if n.startswith("TimedJob")]
    assert len(timed) == 3 and all("exclusive" not in stderrs[n] for n in timed)
    assert slots.company(stderrs, timed)


def test_the_commands_are_bash_that_writes_the_stamps(tmp_path):
    script = f"{slots.share_host(tmp_path)}\n{slots.TAKE_HOST}\necho measured\n"
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and p.stdout == "measured\n"
    assert [mode for mode, *_ in slots.held(p.stderr)] == ["shared", "exclusive"]
    assert (tmp_path / "host-slot.lock").exists()
    # without a slot (another partition), the timed command does nothing
    p = subprocess.run(["bash", "-c", slots.TAKE_HOST], capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr == ""
