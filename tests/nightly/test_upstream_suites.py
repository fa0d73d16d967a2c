"""eckit's, metkit's and FDB's own test suites (ctest), run when the stack is built here:
`spack install --test=root eckit metkit fdb` of the `local` site's lock into a fresh root,
offline, from the source mirror. Each suite must run and pass, but for the tests our
recipes exclude, each for a reason it names (packages/spack_repo/iostack/packages/*:
OFFLINE_EXCLUDED): they reach for the network or for services a build node has not.

In the nightly tier: eckit's suite alone builds some hundreds of test programs, which does
not fit CI's budget on a 2-core node (the measured times are in the tier's summary)."""
import re
import subprocess
import time

import pytest

from iostack.core import paths

SUITES = ("eckit", "metkit", "fdb")
#: ctest's summary line
_SUMMARY = re.compile(r"(\d+)% tests passed, (\d+) tests? failed out of (\d+)")


def excluded(package: str) -> dict[str, str]:
    """The tests a recipe excludes offline, with why (its OFFLINE_EXCLUDED)."""
    text = (paths.REPO / "packages" / "spack_repo" / "iostack" / "packages" / package /
            "package.py").read_text()
    found = re.search(r"OFFLINE_EXCLUDED = \{(.*?)\n    \}", text, re.S)
    return dict(re.findall(r'"([^"]+)":\s*"([^"]+)"', found.group(1))) if found else {}


@pytest.fixture(scope="module")
def tested_install(tmp_path_factory, timings):
    root = tmp_path_factory.mktemp("upstream-suites")
    start = time.monotonic()
    run = subprocess.run([str(paths.REPO / "bin" / "iostack"), "spack", "--site", "local",
                          "--root", str(root), "--", "install", "--test=root", *SUITES],
                         capture_output=True, text=True, timeout=6 * 3600)
    timings["spack install --test=root eckit metkit fdb (cold)"] = time.monotonic() - start
    return root, run


@pytest.mark.parametrize("package", SUITES)
def test_the_upstream_suite_ran_and_passed(tested_install, package, timings):
    root, run = tested_install
    assert run.returncode == 0, (run.stdout + run.stderr)[-5000:]
    (prefix,) = (root / "opt").glob(f"{package}-*")
    log = (prefix / ".spack" / "spack-build-out.txt").read_text(errors="replace")
    summaries = _SUMMARY.findall(log)
    assert summaries, f"{package}: ctest did not run"
    percent, failed, total = summaries[-1]
    assert (percent, failed) == ("100", "0"), log[-3000:]
    assert int(total) > 0
    timings[f"  {package}: ctest"] = f"{total} tests passed, {len(excluded(package))} excluded"
    for name, why in excluded(package).items():
        assert why, f"{package}: {name} excluded without a reason"
