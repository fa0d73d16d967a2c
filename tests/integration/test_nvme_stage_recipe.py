"""The nvme-stage Spack recipe's install(), run inside `spack python` with a stand-in
spec and a temporary prefix: no concretization, no download. Skipped without Spack."""
import stat

from test_netcdf_bench_recipe import spack_python  # noqa: F401  (fixture)

from iostack.core import paths


def test_nvme_stage_installs_the_script(spack_python, tmp_path):  # noqa: F811
    out = spack_python("nvme-stage", "1.1.0", tmp_path / "prefix")
    assert "done" in out
    installed = tmp_path / "prefix" / "bin" / "nvme-stage"
    assert installed.read_bytes() == (paths.REPO / "src" / "nvme-stage" / "nvme-stage").read_bytes()
    assert installed.stat().st_mode & stat.S_IXUSR
    assert "recipe builds 1.2.0" in spack_python("nvme-stage", "1.2.0", tmp_path / "p2")
