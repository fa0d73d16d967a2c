"""Test tiers for iostack.

Every test lives in one tier directory, and the tier is its marker:

- tests/unit         pure Python, no external programs;
- tests/integration  real components on this node (Lmod, ReFrame, ecCodes/FDB,
                     Ansible, loop devices, Slurm, cross compilers, linters);
- tests/spack        needs Spack; skipped with one reason when Spack is absent, except
                     where IOSTACK_REQUIRE_SPACK is set (CI): there a missing Spack fails.

At the end of a run a per-tier summary is printed (counts, skip reasons, minutes spent, summed
over the xdist workers),
so a reader of CI output sees at once which tiers ran, which were skipped and what each
cost.
"""
from __future__ import annotations

import collections
import os
import pathlib
import stat
import sys

import pytest

from support import workers

REPO = pathlib.Path(__file__).resolve().parents[1]
# The tests import this checkout's iostack and iostack_rfm (pytest.ini `pythonpath`), and so
# do the programs they start (ReFrame, python3 -m iostack...), whichever checkout the venv has
# installed.
os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [str(REPO / "lib"), str(REPO / "reframe-tests"), str(REPO / "tools" / "testbed"),
                  os.environ.get("PYTHONPATH")]))

pytest_plugins = ["support.fixtures"]

TIERS = ("unit", "integration", "spack", "nightly")
# The nightly tier (tests/nightly: builds too long for CI, such as OpenIFS and a cold deploy in
# a fresh root) runs in the nightly workflow, which names it: `bin/iostack test tests/nightly`
# with IOSTACK_TIER=nightly. Elsewhere it is not collected, so CI's tiers skip nothing.
collect_ignore = [] if os.environ.get("IOSTACK_TIER") == "nightly" else ["nightly"]
_outcomes: dict[str, collections.Counter] = {t: collections.Counter() for t in TIERS}
_skip_reasons: dict[str, collections.Counter] = {t: collections.Counter() for t in TIERS}
_seconds: collections.Counter = collections.Counter()
_cpu_of_tier: collections.Counter = collections.Counter()
# {what: seconds or text} that tests record for the summary (deploy and build times)
_timings: dict[str, object] = {}
# seconds per test (set-up, call and tear-down), written to .ci/durations.tsv at the end: the
# fresh-machine run (.ci/fresh) keeps the slowest 20 in .ci/slowest.tsv for the next change
_durations: collections.Counter = collections.Counter()
# CPU seconds per test: its worker's and every program it started and waited for (Spack's
# compilers, ReFrame, callgrind), the same whether the machine is idle or busy, so what a
# change costs CI can be read on a loaded machine too. A daemon a fixture starts (slurmd) is
# counted where it is reaped, if ever.
_cpu: collections.Counter = collections.Counter()
# where and when each test ran: its xdist worker and its first report's start (epoch s), so
# a run's critical path can be read from durations.tsv
_started: dict[str, tuple[str, float]] = {}
CPU = "iostack cpu"
DURATIONS = REPO / ".ci" / "durations.tsv"


def _tier_of(path: pathlib.Path) -> str | None:
    try:
        rel = path.resolve().relative_to(REPO / "tests")
    except ValueError:
        return None
    return rel.parts[0] if rel.parts and rel.parts[0] in TIERS else None


def pytest_configure(config):
    for tier in TIERS:
        config.addinivalue_line("markers", f"{tier}: iostack {tier} tier")
    config.addinivalue_line("markers", "root_tmp: this test's tmp_path stays root's (it "
                                       "checks what root trusts), not the service account's")
    _temporary_directories_for_the_service_account()
    # what the library logs is printed as bin/iostack prints it (its CLI sets this up), so
    # tests that call the library see the same lines on stdout and stderr
    from iostack import cli

    cli.configure_output()


# before the xdist worker's own hook (pytest.ini runs two workers)
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = _tier_of(pathlib.Path(str(item.fspath)))
        if tier:
            item.add_marker(getattr(pytest.mark, tier))
    if hasattr(config, "workerinput"):
        workers.order(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") == "loadscope":
        return workers.SharedRootScheduling(config, log)
    return None


TIMING = "iostack timing: "
_timings_sent: dict[str, object] = {}
_cpu_start = pytest.StashKey[float]()


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item.stash[_cpu_start] = _cpu_seconds()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Timings a test recorded travel in its report, so the run's summary has them when the
    test ran in an xdist worker; so does its CPU time, in its last report (tear-down)."""
    report = yield
    if call.when == "teardown" and _cpu_start in item.stash:
        report.user_properties.append((CPU, _cpu_seconds() - item.stash[_cpu_start]))
    for what, value in _timings.items():
        if _timings_sent.get(what) != value:
            report.user_properties.append((TIMING + what, value))
            _timings_sent[what] = value
    return report


def pytest_runtest_logreport(report):
    tier = _tier_of(pathlib.Path(report.fspath)) if report.fspath else None
    for name, value in report.user_properties:
        if isinstance(name, str) and name.startswith(TIMING):
            _timings[name.removeprefix(TIMING)] = value
        elif name == CPU and tier is not None:
            _cpu[report.nodeid] += value
            _cpu_of_tier[tier] += value
    if tier is None:
        return
    _seconds[tier] += report.duration
    _durations[report.nodeid] += report.duration
    if report.nodeid not in _started:
        worker = getattr(getattr(report, "node", None), "gateway", None)
        _started[report.nodeid] = (getattr(worker, "id", "-"), getattr(report, "start", 0.0))
    if report.when == "call" or (report.when == "setup" and not report.passed):
        if report.skipped:
            _outcomes[tier]["skipped"] += 1
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            _skip_reasons[tier][reason.removeprefix("Skipped: ")] += 1
        elif report.passed:
            _outcomes[tier]["passed"] += 1
        else:
            _outcomes[tier]["failed"] += 1


def pytest_sessionfinish(session):
    # an xdist worker saw part of the run: the controller writes the whole
    if _durations and not hasattr(session.config, "workerinput"):
        # wall seconds, CPU seconds, test, worker, seconds from the first test's start
        first = min((start for _, start in _started.values() if start), default=0.0)
        DURATIONS.write_text("".join(
            f"{sec:.1f}\t{_cpu[node]:.1f}\t{node}\t{_started[node][0]}"
            f"\t{max(_started[node][1] - first, 0.0):.0f}\n"
            for node, sec in _durations.most_common()))


def pytest_terminal_summary(terminalreporter):
    tr = terminalreporter
    tr.section("iostack tiers")
    for tier in TIERS:
        c = _outcomes[tier]
        tr.write_line(f"{tier:12s} passed={c['passed']} failed={c['failed']} "
                      f"skipped={c['skipped']} minutes={_seconds[tier] / 60:.1f} "
                      f"cpu-minutes={_cpu_of_tier[tier] / 60:.1f}")
        for reason, n in _skip_reasons[tier].most_common():
            tr.write_line(f"{'':12s} skipped {n}: {reason}")
    if _timings:
        tr.section("iostack timings")
        for what, value in _timings.items():
            shown = f"{value:.0f} s" if isinstance(value, float) else str(value)
            tr.write_line(f"{what:48s} {shown}")


#: whether the directories tmp_path_factory makes now go to the service account: in the
#: tiers that run bin/iostack, for a test not marked root_tmp (pytest_runtest_setup)
_for_the_account = False


def _temporary_directories_for_the_service_account() -> None:
    """Run as root, bin/iostack builds and runs the regression as the service account
    (iostack.core.account): a directory tmp_path_factory makes (tmp_path included) is the
    account's, so a deployment root, a state directory or an output there is one it can
    write. Not for the unit tier, nor a test marked root_tmp (it checks what root trusts)."""
    from support import account

    if account.service() is None:
        return
    made = pytest.TempPathFactory.mktemp

    def mktemp(self, basename: str, numbered: bool = True) -> pathlib.Path:
        path = made(self, basename, numbered)
        return account.give(path) if _for_the_account else path
    pytest.TempPathFactory.mktemp = mktemp  # type: ignore[method-assign]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    global _for_the_account
    tier = _tier_of(pathlib.Path(str(item.fspath)))
    _for_the_account = tier in ("integration", "spack", "nightly") and \
        item.get_closest_marker("root_tmp") is None


def _temporary_root(item) -> pathlib.Path | None:
    """/tmp/pytest-of-<user>, once this session has made its temporary directory in it."""
    factory = getattr(item.config, "_tmp_path_factory", None)
    if factory is None or factory._basetemp is None:
        return None
    return factory.getbasetemp().parent


def _searchable(top: pathlib.Path | None) -> bool:
    return top is not None and bool(os.stat(top).st_mode & stat.S_IXOTH)


#: whether the account could enter /tmp/pytest-of-<user> when this test started
_open_before = False


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    global _open_before
    _open_before = _searchable(_temporary_root(item))


def pytest_runtest_teardown(item):
    """A test that shut the account out of the temporary directories fails, named: pytest
    makes /tmp/pytest-of-<user> 0700 whenever a pytest without --basetemp starts (an inner
    run of a test), and the other worker's runs as the account then fail on permissions,
    wherever they are (CI's counts and Darshan checks did)."""
    from support import account

    top = _temporary_root(item)
    acct = account.service()
    if acct is None or not _open_before or _searchable(top):
        return
    account.open_above(top / "x", acct)
    pytest.fail(f"{top} lost o+x during this test: an inner pytest needs a --basetemp of "
                "its own (tests/integration/test_workers.py, inner_basetemp)", pytrace=False)


@pytest.fixture(scope="session")
def repo() -> pathlib.Path:
    return REPO


@pytest.fixture(scope="session")
def venv_bin() -> pathlib.Path:
    """bin/ of the Python environment running the tests (the set-up's venv)."""
    return pathlib.Path(sys.executable).parent


@pytest.fixture(scope="session")
def timings() -> dict[str, object]:
    """Record a named duration for the run's summary: timings["what"] = seconds."""
    return _timings


@pytest.fixture(scope="session")
def is_root() -> bool:
    return os.geteuid() == 0


@pytest.fixture(scope="module")
def loop_devices(request):
    """This module alone uses the host's loop devices (support/hostlock.py says why). A module
    that attaches, partitions or mounts one declares
    `pytestmark = pytest.mark.usefixtures("loop_devices")`, so the lock is taken before its
    own module fixtures (a cluster) and released after them."""
    from support import hostlock

    with hostlock.exclusive("loop-devices", holder=request.node.nodeid):
        yield
