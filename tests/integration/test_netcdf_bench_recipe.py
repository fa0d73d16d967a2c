"""The in-repo-source part of the netcdf-output-bench Spack recipe (copying its src/,
beside the recipe, into the stage), run inside `spack python` against stand-in
stage/spec objects: no concretization, no download, no build. Skipped where the pinned
Spack is not available. The spack_python fixture serves test_nvme_stage_recipe.py too."""
from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

from iostack.core import paths
from iostack.spack import runner
from support import targets

SCRIPT = r"""
import os, sys, types
import spack.repo
from spack.util.prefix import Prefix
from spack.version import Version

name, version, target = sys.argv[1], sys.argv[2], sys.argv[3]
cls = spack.repo.PATH.get_pkg_class(name)
print("has_code", cls.has_code, "versions", sorted(str(v) for v in cls.versions))
spec = types.SimpleNamespace(version=Version(version))
# the package as the recipe and its InRepoPackage mixin see it
fake = types.SimpleNamespace(spec=spec, stage=types.SimpleNamespace(source_path=target),
                             name=name, version_file=cls.version_file,
                             version_pattern=cls.version_pattern,
                             in_repo_source=os.path.join(cls.package_dir, "src"))
fake.checked_source = lambda: cls.checked_source(fake)
fake.stage_in_repo_source = lambda: cls.stage_in_repo_source(fake)
try:
    if hasattr(cls, "copy_in_repo_source"):
        cls.copy_in_repo_source(fake)
    else:
        cls.install(fake, spec, Prefix(target))
    print("done")
except Exception as e:
    print("error", type(e).__name__, e)
"""


@pytest.fixture(scope="module")
def spack_python(tmp_path_factory):
    try:
        spack_root, builtin = runner.locate(targets.settings())
    except runner.SpackMissing as e:
        pytest.skip(f"Spack not found: {e}")
    scope = tmp_path_factory.mktemp("spack-scope")
    (scope / "repos.yaml").write_text(
        "repos:\n"
        f"  iostack: {paths.REPO / 'packages' / 'spack_repo' / 'iostack'}\n"
        f"  builtin: {builtin / 'repos' / 'spack_repo' / 'builtin'}\n")
    script = scope / "recipe_check.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, SPACK_DISABLE_LOCAL_CONFIG="1",
               SPACK_USER_CACHE_PATH=str(scope / "cache"), SPACK_USER_CONFIG_PATH=str(scope / "user"))

    def run(package: str, version: str, target: pathlib.Path) -> str:
        proc = subprocess.run([str(spack_root / "bin" / "spack"), "-C", str(scope), "python", str(script),
                               package, version, str(target)],
                              capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    return run


def test_netcdf_output_bench_stages_the_repo_source(spack_python, tmp_path):
    stage = tmp_path / "spack-src"
    stage.mkdir()
    out = spack_python("netcdf-output-bench", "1.1.1", stage)
    assert "has_code False versions ['1.1.1']" in out and "done" in out
    source = paths.REPO / "src" / "netcdf-output-bench"
    for name in ("CMakeLists.txt", "main.c", "backend_netcdf.c", "backend_pnetcdf.c"):
        assert (stage / name).read_bytes() == (source / name).read_bytes()

    other = tmp_path / "other"
    other.mkdir()
    out = spack_python("netcdf-output-bench", "2.0.0", other)
    assert "error InstallError" in out and "declares version 1.1.1" in out
    assert not any(other.iterdir())

