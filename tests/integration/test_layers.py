"""The layers of lib/iostack hold (import-linter's contracts in pyproject.toml), and a wrong
import breaks them: an upward import, an import circle, core reaching for PyYAML."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

from iostack.core import paths


def lint_imports(venv_bin: pathlib.Path, lib: pathlib.Path) -> subprocess.CompletedProcess:
    exe = venv_bin / "lint-imports"
    if not exe.exists():
        pytest.skip("lint-imports not installed (requirements.txt: import-linter)")
    env = {**os.environ, "PYTHONPATH": f"{lib}:{paths.REFRAME_DIR}"}
    return subprocess.run([str(exe), "--no-cache", str(paths.REPO / "pyproject.toml")],
                          cwd=paths.REPO, env=env, capture_output=True, text=True, timeout=300)


def test_the_contracts_hold(venv_bin):
    p = lint_imports(venv_bin, paths.LIB)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Contracts: 5 kept, 0 broken." in p.stdout
    assert "layers: cli > offline > regression > deployment > spack > site > core KEPT" in p.stdout


@pytest.fixture
def lib_copy(tmp_path):
    """A copy of lib/iostack to break."""
    shutil.copytree(paths.LIB / "iostack", tmp_path / "iostack",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


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


def test_core_stays_standard_library(venv_bin, lib_copy):
    add_import(lib_copy, "iostack.core.filesystems", "import yaml")
    p = lint_imports(venv_bin, lib_copy)
    assert p.returncode == 1
    assert "core imports nothing of ours and only the standard library BROKEN" in p.stdout
    assert "iostack.core.filesystems -> yaml" in p.stdout
