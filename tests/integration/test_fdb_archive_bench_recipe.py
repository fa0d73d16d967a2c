"""The in-repo-source part of the fdb-archive-bench Spack recipe (copying
src/fdb-archive-bench into the stage) inside `spack python`: no concretization, no
download, no build; the version must be the one its CMakeLists.txt declares."""
from test_netcdf_bench_recipe import spack_python  # noqa: F401 (fixture)

from iostack.core import paths


def test_fdb_archive_bench_stages_the_repo_source(spack_python, tmp_path):  # noqa: F811
    stage = tmp_path / "spack-src"
    stage.mkdir()
    out = spack_python("fdb-archive-bench", "1.1.0", stage)
    assert "has_code False versions ['1.1.0']" in out and "done" in out
    source = paths.SRC / "fdb-archive-bench"
    for name in ("CMakeLists.txt", "fdb-archive-bench.cc"):
        assert (stage / name).read_bytes() == (source / name).read_bytes()

    other = tmp_path / "other"
    other.mkdir()
    out = spack_python("fdb-archive-bench", "2.0.0", other)
    assert "error InstallError" in out and "declares version 1.1.0" in out
    assert not any(other.iterdir())
