"""pyproject.toml installs iostack and iostack_rfm: `pip install .` into a fresh venv gives a
working `iostack` command, which finds the repository through IOSTACK_REPO and says so when
there is none; set-up's editable install finds it by itself. Needs the package index (PyPI)
for the build backend, as set-up does."""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from iostack.core import paths
from support import account


def tracked_copy(dest: pathlib.Path) -> pathlib.Path:
    """The checkout's files (tracked, and new ones not ignored) at another path."""
    files = subprocess.run(["git", "-C", str(paths.REPO), "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = paths.REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name, follow_symlinks=False)
    return dest


def venv(where: pathlib.Path) -> pathlib.Path:
    base = shutil.which("python3") or sys.executable
    subprocess.run([base, "-m", "venv", str(where)], check=True, capture_output=True)
    return where / "bin"


def run(*cmd, cwd, env=None):
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "IOSTACK_REPO")}
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd,
                          env={**clean, **(env or {})}, timeout=900)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    return tracked_copy(account.for_root(tmp_path_factory.mktemp("checkout")))


# the installed command runs as root here: the repository it names must be root's (trust.py)
@pytest.mark.root_tmp
def test_pip_install_gives_a_working_command_that_needs_the_repository_named(checkout, tmp_path):
    bin_dir = venv(tmp_path / "venv")
    p = run(bin_dir / "pip", "install", "-q", checkout, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    installed = run(bin_dir / "python", "-c", "import iostack, iostack_rfm.base; "
                    "print(iostack.__file__)", cwd=tmp_path)
    # the installed copy, not the checkout's; iostack_rfm imports ReFrame, which it lacks
    assert "No module named 'reframe'" in installed.stderr
    site_packages = run(bin_dir / "python", "-c", "import iostack.deployment.fdbconfig as f; "
                        "print(f.__file__); print(f.TEMPLATE.read_text()[:40])", cwd=tmp_path)
    assert site_packages.returncode == 0, site_packages.stderr
    assert str(tmp_path / "venv") in site_packages.stdout.splitlines()[0]   # its data came too
    page = run(bin_dir / "python", "-c", "from iostack.regression import report; "
               "print(report._template().filename)", cwd=tmp_path)
    assert page.returncode == 0, page.stderr    # the report page's template, and Jinja2
    assert page.stdout.startswith(str(tmp_path / "venv")) and page.stdout.strip().endswith(".html")
    # the job tools and the jobs' scripts came too, and a job tool needs no ReFrame
    tool = run(bin_dir / "python", "-c", "import sys, iostack_rfm.jobs.gribcompare as g; "
               "print(g.__file__); print('reframe' in sys.modules)", cwd=tmp_path)
    assert tool.returncode == 0, tool.stderr
    assert tool.stdout.startswith(str(tmp_path / "venv")) and tool.stdout.split()[1] == "False"
    script = pathlib.Path(tool.stdout.split()[0]).parents[1] / "templates" / "fdb-throughput.sh"
    assert script.is_file()
    assert run(bin_dir / "python", "-m", "iostack_rfm.jobs.gribcompare", "--help", cwd=tmp_path).returncode == 0

    helped = run(bin_dir / "iostack", "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "deploy" in helped.stdout and "nightly" in helped.stdout
    nowhere = run(bin_dir / "iostack", "sites", cwd=tmp_path)
    assert nowhere.returncode == 2 and nowhere.stdout == ""
    assert nowhere.stderr.startswith("iostack: error: iostack is installed at ")
    assert "set IOSTACK_REPO" in nowhere.stderr and nowhere.stderr.count("\n") == 1
    wrong = run(bin_dir / "iostack", "sites", cwd=tmp_path, env={"IOSTACK_REPO": str(tmp_path)})
    assert wrong.returncode == 2 and f"IOSTACK_REPO={tmp_path} is not an iostack repository" in wrong.stderr
    named = run(bin_dir / "iostack", "sites", cwd=tmp_path, env={"IOSTACK_REPO": str(checkout)})
    assert named.returncode == 0, named.stderr
    assert named.stdout.split() == sorted(p.name for p in (checkout / "spack-env" / "sites").iterdir()
                                          if (p / "spack.yaml").is_file())


def test_the_editable_install_of_set_up_is_the_checkout(checkout, tmp_path):
    bin_dir = venv(tmp_path / "venv")
    pins = re.findall(r"^setuptools==\S+", (checkout / "requirements.txt").read_text(), re.M)
    assert run(bin_dir / "pip", "install", "-q", *pins, cwd=tmp_path).returncode == 0
    # what set-up runs (iostack.offline.setup.python_tools)
    p = run(bin_dir / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
            "-e", checkout, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    where = run(bin_dir / "python", "-c", "import iostack.core.paths as p, iostack_rfm.parsers.steps as s; "
                "print(p.REPO); print(s.__file__)", cwd="/")
    assert where.stdout.split() == [str(checkout), str(checkout / "reframe-tests/iostack_rfm/parsers/steps.py")]
    assert run(bin_dir / "iostack", "--help", cwd="/").returncode == 0
    # as toolchains/fdb_roundtrip.py imports it: the installed package, no PYTHONPATH
    tool = run(bin_dir / "python", "-c", "from iostack_rfm.jobs import gribcompare; "
               "print(gribcompare.__file__)", cwd="/")
    assert tool.stdout.split() == [str(checkout / "reframe-tests/iostack_rfm/jobs/gribcompare.py")]
