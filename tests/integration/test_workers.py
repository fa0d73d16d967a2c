"""How the suite is spread over xdist's two workers (tests/support/workers.py), run for real:
pytest with pytest.ini's options on a tree of stand-in modules at the shared modules' paths.
Each shared session fixture must be made once, every shared module must run on the worker
that made it, in one block from the start, and the other modules must run on both workers."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

from support import workers

REAL_CONFTEST = pathlib.Path(__file__).parents[1] / "conftest.py"
# the stand-in tree's conftest: the suite's own two hooks, its stand-in fixtures
CONFTEST = textwrap.dedent(f"""
    import importlib.util, json, os, pathlib
    import pytest

    spec = importlib.util.spec_from_file_location("iostack_conftest", {str(REAL_CONFTEST)!r})
    real = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(real)
    pytest_collection_modifyitems = real.pytest_collection_modifyitems
    pytest_xdist_make_scheduler = real.pytest_xdist_make_scheduler
    pytest_runtest_makereport = real.pytest_runtest_makereport
    pytest_runtest_logreport = real.pytest_runtest_logreport
    pytest_terminal_summary = real.pytest_terminal_summary
    timings = real.timings

    LOG = pathlib.Path(os.environ.get("WORKERS_LOG", os.devnull))

    def note(**what):
        with LOG.open("a") as f:
            f.write(json.dumps({{"worker": os.environ.get("PYTEST_XDIST_WORKER"), **what}}) + "\\n")

    @pytest.fixture(scope="session")
    def local_deploy():
        note(made="local_deploy")

    @pytest.fixture(scope="session")
    def fresh_bookworm_node():
        note(made="fresh_bookworm_node")

    @pytest.fixture(scope="session")
    def local_buildcache(local_deploy):
        note(made="local_buildcache")

    @pytest.fixture
    def ran(request):
        yield
        note(test=request.node.nodeid)
""")
SHARED_TEST = textwrap.dedent("""
    import time
    def test_one({fixture}, ran, timings):
        timings["stand-in " + __name__] = "recorded"
        time.sleep(0.2)
    def test_two(ran):
        time.sleep(0.2)
""")
OTHER_TEST = textwrap.dedent("""
    import time
    def test_alone(ran):
        time.sleep(1.5)
""")


def stand_in_tree(tmp_path: pathlib.Path, shared: frozenset[str]) -> pathlib.Path:
    tree = tmp_path / "tree"
    fixtures = ["local_deploy", "fresh_bookworm_node", "local_buildcache"]
    for k, module in enumerate(sorted(shared)):
        path = tree / module
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(SHARED_TEST.format(fixture=fixtures[k % 3]))
    for k in range(8):
        # collected before the shared modules
        path = tree / "tests" / "integration" / f"test_early_{k}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(OTHER_TEST)
    (tree / "tests" / "conftest.py").write_text(CONFTEST)
    ini = (pathlib.Path(__file__).parents[2] / "pytest.ini").read_text()
    options = next(line for line in ini.splitlines() if line.startswith("addopts"))
    (tree / "pytest.ini").write_text(f"[pytest]\n{options}\n")
    return tree


def clean_env() -> dict[str, str]:
    """This process's environment without the outer xdist worker's variables, and with
    tests/ importable (for `support`). An inner pytest is given a --basetemp of its own
    (inner_basetemp): left to make one under /tmp/pytest-of-root, it takes that directory's o+x away
    (pytest 9 makes it 0700), and the service account's runs of the outer session's other
    worker lose every directory in it at once."""
    tests_dir = pathlib.Path(__file__).parents[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env["PYTHONPATH"] = os.pathsep.join([str(tests_dir), env.get("PYTHONPATH", "")])
    return env


def inner_basetemp(beside: pathlib.Path) -> list[str]:
    """An inner pytest's --basetemp, in the outer test's directory (clean_env says why)."""
    return ["--basetemp", str(beside.parent / f"{beside.name}-basetemp")]


def run_tree(tree: pathlib.Path, log: pathlib.Path) -> subprocess.CompletedProcess:
    env = {**clean_env(), "WORKERS_LOG": str(log)}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           *inner_basetemp(tree), "tests"],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=300)


def test_shared_fixtures_are_made_once_and_their_modules_run_on_one_worker(tmp_path):
    tree = stand_in_tree(tmp_path, workers.SHARED_MODULES)
    log = tmp_path / "log.jsonl"
    p = run_tree(tree, log)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    events = [json.loads(line) for line in log.read_text().splitlines()]
    made = [(e["made"], e["worker"]) for e in events if "made" in e]
    assert sorted(m for m, _ in made) == ["fresh_bookworm_node", "local_buildcache",
                                          "local_deploy"]
    (shared_worker,) = {w for _, w in made}
    ran = [(e["test"].split("::")[0], e["worker"]) for e in events if "test" in e]
    assert len(ran) == 2 * len(workers.SHARED_MODULES) + 8
    assert {w for m, w in ran if m in workers.SHARED_MODULES} == {shared_worker}
    # the group is that worker's first work, in one block
    on_shared = [m for m, w in ran if w == shared_worker]
    n = 2 * len(workers.SHARED_MODULES)
    assert set(on_shared[:n]) == workers.SHARED_MODULES
    assert {w for m, w in ran if m not in workers.SHARED_MODULES} == {"gw0", "gw1"}
    # what the tests recorded in their workers is in the run's summary
    summary = p.stdout[p.stdout.index("iostack timings"):]
    assert summary.count("stand-in test_") == len(workers.SHARED_MODULES)


def collect_and_judge(directory: pathlib.Path, tmp_path: pathlib.Path) -> str:
    """stale()'s verdict on the suite in `directory`, collected as pytest.ini collects it."""
    out = tmp_path / "stale.txt"
    env = {**clean_env(), "WORKERS_STALE": str(out)}
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0",
                        *inner_basetemp(tmp_path), "-p", "support.workers", "--co", "-q", "tests"],
                       cwd=directory, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    return out.read_text()


def test_the_shared_list_names_exactly_the_modules_that_use_a_shared_fixture(tmp_path):
    assert collect_and_judge(pathlib.Path(__file__).parents[2], tmp_path) == ""


def test_a_module_missing_from_the_shared_list_is_named(tmp_path):
    tree = stand_in_tree(tmp_path, workers.SHARED_MODULES)
    # a new module that uses a shared fixture, not yet in SHARED_MODULES; and one listed
    # module that no longer uses any
    (tree / "tests" / "spack" / "test_spack_new.py").write_text(
        SHARED_TEST.format(fixture="local_deploy"))
    (tree / "tests" / "spack" / "test_spack_counts.py").write_text(OTHER_TEST)
    assert collect_and_judge(tree, tmp_path) == (
        "tests/support/workers.py SHARED_MODULES is stale: add tests/spack/test_spack_new.py; "
        "remove tests/spack/test_spack_counts.py")
