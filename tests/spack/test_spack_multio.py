"""MultIO on the Spack-built local stack (CI's deployment): its module gives the tools, and
MultioBitIdentityCheck, run by the nightly's entry point on that stack, passes on every
input while each of its controls (a flipped bit, a field MultIO never saw) makes the
comparison fail, counted message by message."""
import os
import re
import subprocess

import pytest

from iostack.regression import results, samples


def lmod(script: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LMOD", "MODULE"))}
    return subprocess.run(["bash", "-c", "source /usr/share/lmod/lmod/init/bash && " + script],
                          capture_output=True, text=True, env=env)


def test_multio_module_gives_its_tools_on_the_stack_fdb(local_deploy):
    root, _ = local_deploy
    core = root / "current" / "modulefiles" / "Core"
    out = lmod(f"module use {core} && module load openmpi multio && command -v multio-sink "
               "multio-hammer && ldd $(command -v multio-sink) | grep -E 'libfdb5|libeckit.so'")
    assert out.returncode == 0 and out.stderr == "", out.stderr
    lines = out.stdout.splitlines()
    assert all(line.startswith(str(root / "opt" / "multio-1.5.1-")) for line in lines[:2])
    # the stack's FDB and eckit, not Debian's
    assert lines[2:] and all(str(root / "opt") in line for line in lines[2:]), lines[2:]


@pytest.fixture(scope="module")
def multio_nightly(traced_nightly):
    """MultioBitIdentityCheck's cases as the Spack tier's nightly ran them (traced_nightly:
    the whole nightly mode, where the check runs on the stack, the one environment with
    MultIO): a run of its own would feed the same 549 messages through multio-sink three
    times again."""
    run, report, _ = traced_nightly
    cases = {n: tc for n, tc in results.last_attempts(report).items()
             if tc["name"].startswith("MultioBitIdentityCheck")}
    return run, cases


def compared(tc, which):
    path = os.path.join(tc["outputdir"], f"compare-{which}.out")
    text = open(path).read()
    counts = dict(re.findall(r"\b(matched|missing|extra|identical|differing)=(\d+)", text))
    return re.search(r"RESULT=(\w+)", text).group(1), {k: int(v) for k, v in counts.items()}


def test_multio_into_fdb_is_bit_identical_and_each_control_fails(multio_nightly):
    run, cases = multio_nightly
    assert {n: tc["result"] for n, tc in cases.items()} == {n: "pass" for n in cases}
    assert run.returncode == 0
    inputs = {"synthetic": 3 * (4 * 3 + 2),
              **{name: s.messages for name, s in samples.GRIB_SETS.items()}}
    seen = set()
    for tc in cases.values():
        n = inputs[tc["grib_input"]]
        request, extract = compared(tc, "request"), compared(tc, "extract")
        if tc["scenario"] == "archive":
            assert request == extract == ("IDENTICAL", {"matched": n, "missing": 0, "extra": 0,
                                                        "identical": n, "differing": 0})
        elif tc["scenario"] == "flip-one-bit":
            assert request == ("DIFFERENT", {"matched": n, "missing": 0, "extra": 0,
                                             "identical": n - 1, "differing": 1})
            assert extract[0] == "IDENTICAL"
        else:   # missing-field: one message never went through MultIO
            for got in (request, extract):
                assert got == ("DIFFERENT", {"matched": n - 1, "missing": 1, "extra": 0,
                                             "identical": n - 1, "differing": 0})
        seen.add((tc["grib_input"], tc["scenario"]))
    assert seen == {(i, s) for i in inputs for s in ("archive", "flip-one-bit", "missing-field")}
