"""The layers of lib/iostack and the kinds of iostack_rfm hold (import-linter's contracts in
pyproject.toml), and a wrong import breaks them: an upward import, an import circle, core
reaching for PyYAML, a job tool reaching for ReFrame, PyYAML or a plugin, a parser reaching for
a job tool."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from iostack.core import paths


def lint_imports(venv_bin: pathlib.Path, lib: pathlib.Path,
                 rfm: pathlib.Path = paths.REFRAME_DIR) -> subprocess.CompletedProcess:
    """lint-imports on pyproject.toml's contracts, with iostack from `lib` and iostack_rfm
    from `rfm`."""
    exe = venv_bin / "lint-imports"
    if not exe.exists():
        pytest.skip("lint-imports not installed (requirements.txt: import-linter)")
    env = {**os.environ, "PYTHONPATH": f"{lib}:{rfm}:{paths.REPO / 'tools' / 'testbed'}"}
    return subprocess.run([str(exe), "--no-cache", str(paths.REPO / "pyproject.toml")],
                          cwd=paths.REPO, env=env, capture_output=True, text=True, timeout=300)


def test_the_contracts_hold(venv_bin):
    p = lint_imports(venv_bin, paths.LIB)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Contracts: 7 kept, 0 broken." in p.stdout
    assert "layers: cli > offline > regression > deployment > spack > site > core KEPT" in p.stdout
    assert f"{JOBS_STDLIB} KEPT" in p.stdout and f"{PARSERS_PURE} KEPT" in p.stdout


@pytest.fixture
def lib_copy(tmp_path):
    """A copy of lib/iostack to break."""
    shutil.copytree(paths.LIB / "iostack", tmp_path / "iostack",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


@pytest.fixture
def rfm_copy(tmp_path):
    """A copy of reframe-tests/iostack_rfm to break."""
    shutil.copytree(paths.REFRAME_DIR / "iostack_rfm", tmp_path / "rfm" / "iostack_rfm",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "rfm"


def add_import(lib: pathlib.Path, module: str, line: str) -> None:
    path = lib / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\n{line}  # a deliberate wrong import\n")


def test_an_upward_import_breaks_the_layers(venv_bin, lib_copy):
    add_import(lib_copy, "iostack.spack.runner", "from iostack.deployment import releases")
    p = lint_imports(venv_bin, lib_copy)
    assert p.returncode == 1
    assert "layers: cli > offline > regression > deployment > spack > site > core BROKEN" in p.stdout
    assert "iostack.spack.runner -> iostack.deployment.releases" in p.stdout


def test_an_import_circle_is_refused(venv_bin, lib_copy):
    # nightly imports results; results importing nightly closes a circle inside one layer
    add_import(lib_copy, "iostack.regression.results", "from iostack.regression import nightly")
    p = lint_imports(venv_bin, lib_copy)
    assert p.returncode == 1 and "no import circles BROKEN" in p.stdout
    assert ".results -> .nightly" in p.stdout or ".nightly -> .results" in p.stdout


def test_the_library_does_not_reach_for_the_test_beds(venv_bin, lib_copy):
    add_import(lib_copy, "iostack.regression.nightly", "from iostack_testbed import slurm")
    p = lint_imports(venv_bin, lib_copy)
    assert p.returncode == 1
    assert "the library imports neither the checks' library nor the test beds BROKEN" in p.stdout
    assert "iostack.regression.nightly -> iostack_testbed.slurm" in p.stdout


def test_core_stays_standard_library(venv_bin, lib_copy):
    add_import(lib_copy, "iostack.core.filesystems", "import yaml")
    p = lint_imports(venv_bin, lib_copy)
    assert p.returncode == 1
    assert "core imports nothing of ours and only the standard library BROKEN" in p.stdout
    assert "iostack.core.filesystems -> yaml" in p.stdout


JOBS_STDLIB = "job tools run under any python3: standard library only"
PARSERS_PURE = "parsers are pure: no ReFrame, no plugins, no job tools"


@pytest.mark.parametrize("module, line, imported", [
    ("iostack_rfm.jobs.gribcompare", "import reframe", "reframe"),
    ("iostack_rfm.jobs.nodestate", "import yaml", "yaml"),
])
def test_a_job_tool_stays_standard_library(venv_bin, rfm_copy, module, line, imported):
    add_import(rfm_copy, module, line)
    p = lint_imports(venv_bin, paths.LIB, rfm_copy)
    assert p.returncode == 1
    assert f"{JOBS_STDLIB} BROKEN" in p.stdout
    assert f"{module} -> {imported}" in p.stdout


def test_a_job_tool_does_not_reach_the_plugins(venv_bin, rfm_copy):
    # the plugin brings ReFrame (and through iostack, PyYAML) along: each is named with its chain
    add_import(rfm_copy, "iostack_rfm.jobs.multio", "from iostack_rfm import base")
    p = lint_imports(venv_bin, paths.LIB, rfm_copy)
    assert p.returncode == 1
    assert f"{JOBS_STDLIB} BROKEN" in p.stdout
    assert "iostack_rfm.jobs is not allowed to import iostack_rfm.base" in p.stdout
    assert "iostack_rfm.jobs is not allowed to import reframe" in p.stdout
    assert "iostack_rfm.base -> reframe" in p.stdout


def test_a_parser_does_not_reach_the_job_tools(venv_bin, rfm_copy):
    add_import(rfm_copy, "iostack_rfm.parsers.steps", "from iostack_rfm.jobs import gribcompare")
    p = lint_imports(venv_bin, paths.LIB, rfm_copy)
    assert p.returncode == 1
    assert f"{PARSERS_PURE} BROKEN" in p.stdout
    assert "iostack_rfm.parsers.steps -> iostack_rfm.jobs.gribcompare" in p.stdout


def test_the_job_tools_reach_only_the_standard_library():
    """What the contract's list of forbidden packages cannot say: every module the job tools
    import, directly or not, is another job tool or the standard library's."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("iostack", "iostack_rfm", "iostack_testbed",
                              include_external_packages=True, cache_dir=None)
    tools = [m for m in graph.modules if m.startswith("iostack_rfm.jobs.")]
    assert {"iostack_rfm.jobs.gribcompare", "iostack_rfm.jobs.nodestate"} <= set(tools)
    reached = set().union(*(graph.find_upstream_modules(m) for m in tools))
    ours = {m for m in reached if m.split(".")[0] in ("iostack", "iostack_rfm", "iostack_testbed")}
    assert all(m.startswith("iostack_rfm.jobs.") for m in ours), sorted(ours)
    foreign = sorted(m for m in reached - ours if m.split(".")[0] not in sys.stdlib_module_names)
    assert foreign == []
