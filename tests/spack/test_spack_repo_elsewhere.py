"""The Spack repository works outside this checkout: a copy of packages/ elsewhere, added to
a Spack configuration of its own (none of iostack's environments, no IOSTACK_* variable),
concretizes and installs an in-repo recipe from the source beside it, and its Cray recipes
find their toolchain files in the copy."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

from iostack.core import paths
from iostack.spack import runner
from iostack.core import account as iostack_account
from support import account as support_account
from support import targets


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory):
    """(spack command, environment): the copied repository and a config scope naming it."""
    spack_root, spack_packages = runner.locate(targets.settings())
    top = tmp_path_factory.mktemp("elsewhere")
    assert paths.REPO not in top.parents
    shutil.copytree(paths.REPO / "packages", top / "packages", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    scope = top / "scope"
    scope.mkdir()
    (scope / "repos.yaml").write_text(
        "repos::\n"
        f"  iostack: {top / 'packages' / 'spack_repo' / 'iostack'}\n"
        f"  builtin: {spack_packages / 'repos' / 'spack_repo' / 'builtin'}\n")
    (scope / "config.yaml").write_text(
        "config:\n"
        f"  install_tree: {{root: {top / 'opt'}}}\n"
        f"  build_stage: [{top / 'stage'}]\n"
        f"  source_cache: {top / 'cache' / 'sources'}\n"
        f"  misc_cache: {top / 'cache' / 'misc'}\n")
    rsync = subprocess.run(["rsync", "--version"], capture_output=True, text=True).stdout.split()[2]
    gcc = subprocess.run(["gcc", "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
    # a compiler declared, so Spack detects none (it would write what it found into its own
    # installation scope)
    (scope / "packages.yaml").write_text(
        "packages:\n  rsync:\n    buildable: false\n"
        f"    externals:\n    - spec: rsync@{rsync}\n      prefix: /usr\n"
        "  gcc:\n    buildable: false\n"
        f"    externals:\n    - spec: gcc@{gcc} languages:='c,c++,fortran'\n      prefix: /usr\n"
        "      extra_attributes:\n        compilers:\n          c: /usr/bin/gcc\n"
        "          cxx: /usr/bin/g++\n          fortran: /usr/bin/gfortran\n")
    (scope / "mirrors.yaml").write_text("mirrors:: {}\n")   # nothing to fetch
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOSTACK_", "SPACK_"))}
    env.update(SPACK_ROOT=str(spack_root), SPACK_DISABLE_LOCAL_CONFIG="1",
               SPACK_USER_CACHE_PATH=str(top / "user-cache"),
               SPACK_PYTHON=str(targets.settings().venv / "bin" / "python"))
    yield [str(spack_root / "bin" / "spack"), "-C", str(scope)], env, top
    # nothing was written into Spack's own configuration
    assert runner.foreign_config(spack_root) == []


def spack(elsewhere, *args, timeout=1800):
    """Spack on the copy, as the service account when the suite runs as root: a build in CI
    never runs as root (issue 33)."""
    cmd, env, top = elsewhere
    acct = support_account.service()
    if acct is not None:
        cmd = iostack_account.as_account(acct, cmd)
        env = {**env, **{"HOME": str(acct.home), "USER": acct.name, "LOGNAME": acct.name}}
    p = subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, cwd=top,
                       timeout=timeout)
    print(p.stdout[-4000:], p.stderr[-3000:])
    return p


def test_an_in_repo_recipe_installs_from_the_copy(elsewhere):
    _, _, top = elsewhere
    p = spack(elsewhere, "install", "nvme-stage")
    assert p.returncode == 0
    prefix = spack(elsewhere, "location", "-i", "nvme-stage").stdout.strip()
    assert pathlib.Path(prefix).is_relative_to(top / "opt")
    installed = pathlib.Path(prefix, "bin", "nvme-stage")
    source = top / "packages/spack_repo/iostack/packages/nvme_stage/src/nvme-stage"
    assert installed.read_bytes() == source.read_bytes() and os.access(installed, os.X_OK)
    version = subprocess.run([str(installed), "--version"], capture_output=True, text=True)
    assert version.stdout.split()[-1] == "1.1.0", version.stdout + version.stderr


def test_the_cray_toolchain_files_are_found_in_the_copy(elsewhere):
    _, _, top = elsewhere
    p = spack(elsewhere, "python", "-c",
              "import spack.repo; spack.repo.PATH.get_pkg_class('eckit'); "
              "import spack_repo.iostack.craype as c; print(c.TOOLCHAINS)")
    assert p.returncode == 0
    toolchains = pathlib.Path(p.stdout.strip().splitlines()[-1])
    assert toolchains == top / "packages/spack_repo/iostack/toolchains"
    for name in ("cray-cce.cmake", "cray-gnu.cmake", "include/cray-common.cmake",
                 "include/compiler-flags.cmake", "preseed/cray-ex-zen2.cmake"):
        assert (toolchains / name).is_file() and not (toolchains / name).is_symlink(), name
