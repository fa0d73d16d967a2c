"""The type checker over lib/, reframe-tests/ and the test beds (mypy, pyproject.toml
[tool.mypy]) finds nothing, and finds the kind of bug it is there for: NodeHardwareCheck
called `paths.site_of_system`, which does not exist, and crashed on every system without an
inventory of its own."""
from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

from iostack.core import paths


def mypy(venv_bin: pathlib.Path, tmp_path: pathlib.Path, *files) -> subprocess.CompletedProcess:
    exe = venv_bin / "mypy"
    if not exe.exists():
        pytest.skip("mypy not installed (requirements.txt)")
    return subprocess.run([str(exe), "--cache-dir", str(tmp_path / "cache"), *map(str, files)],
                          cwd=paths.REPO, capture_output=True, text=True, timeout=900,
                          env={k: v for k, v in os.environ.items() if k != "MYPYPATH"})


def test_the_code_type_checks(venv_bin, tmp_path):
    p = mypy(venv_bin, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("Success: no issues found in ")


def test_a_call_of_a_function_that_does_not_exist_is_found(venv_bin, tmp_path):
    check = (paths.REFRAME_DIR / "checks" / "node_hardware.py").read_text()
    assert "context.site_of(self.current_partition)" in check
    old = tmp_path / "node_hardware.py"     # the kind of call the check once made
    old.write_text(check.replace("context.site_of(self.current_partition)",
                                 "paths.site_of_system(system)"))
    p = mypy(venv_bin, tmp_path, old)
    assert p.returncode == 1
    assert 'Module has no attribute "site_of_system"' in p.stdout, p.stdout
