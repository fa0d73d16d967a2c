"""toolchains/preseed/regenerate.sh against the committed pre-seed files.

The committed files must be what the probe measures today: natively on this
x86_64 host for the Cray EX files (same x86_64 Linux ABI as the compute
nodes), and with the aarch64 toolchain under qemu for the Arm file. A probe
check added without regenerating the files fails here."""
from __future__ import annotations

import importlib.util
import pathlib

import pytest

_spec = importlib.util.spec_from_file_location(
    "toolchain_testlib", pathlib.Path(__file__).parent / "toolchain_fixtures" / "toolchain_testlib.py")
tl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tl)

REGENERATE = tl.PRESEED / "regenerate.sh"


def _comments(text: str) -> list[str]:
    """The per-value source comments (after the header, which names host and date)."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("set("))
    return [line for line in lines[first - 1:] if line.startswith("#")]


def _regenerate(out: pathlib.Path, *args: str):
    res = tl.run(["bash", REGENERATE, "--output", out, *args], env=tl.clean_env())
    assert res.returncode == 0, res.stdout
    assert f"wrote {out}" in res.stdout
    return tl.parse_preseed(out)


@pytest.mark.skipif(bool(tl.missing("ecbuild", "gcc", "g++", "gfortran")), reason="native compilers or ecbuild missing")
def test_native_regeneration_matches_cray_ex_files(tmp_path):
    measured = _regenerate(tmp_path / "x86_64.cmake", "--target", "x86_64-test")
    assert measured["IOSTACK_LDBL_MANT_DIG"] == "64"      # really ran on x86_64
    assert measured["HAVE_ECCODES_SIZEOF_INT"] == "TRUE"
    text = (tmp_path / "x86_64.cmake").read_text()
    assert text.splitlines()[0] == "# iostack pre-seeded configure results for target: x86_64-test"
    # both Cray EX targets (cray-ex's zen2, setonix's zen3): x86_64 Linux, one ABI
    for name in ("cray-ex-zen2.cmake", "cray-ex-zen3.cmake"):
        committed = tl.parse_preseed(tl.PRESEED / name)
        assert list(committed) == list(measured), name   # same variables, same order
        assert committed == measured, name
        # the comments too: what fixes each value is regenerated with it
        assert _comments(text) == _comments((tl.PRESEED / name).read_text()), name


@pytest.mark.skipif(bool(tl.missing("ecbuild", "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-gfortran",
                                    "qemu-aarch64")), reason="aarch64 cross tools missing")
def test_emulated_regeneration_matches_aarch64_file(tmp_path):
    measured = _regenerate(tmp_path / "a64.cmake", "--target", "aarch64-linux-gnu",
                           "--toolchain", str(tl.TOOLCHAINS / "aarch64-linux-gnu.cmake"), "--emulate")
    assert measured["IOSTACK_LDBL_MANT_DIG"] == "113"     # really ran as aarch64
    committed = tl.PRESEED / "aarch64-linux-gnu.cmake"
    assert tl.parse_preseed(committed) == measured
    assert _comments((tmp_path / "a64.cmake").read_text()) == _comments(committed.read_text())


def test_regenerate_writes_nothing_when_a_check_cannot_run(tmp_path):
    if tl.missing("ecbuild", "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-gfortran"):
        pytest.skip("aarch64 cross tools missing")
    # Cross toolchain without --emulate: the aarch64 check programs cannot
    # start on this host, so no (wrong) file may appear.
    out = tmp_path / "never.cmake"
    res = tl.run(["bash", REGENERATE, "--output", out, "--target", "aarch64-linux-gnu",
                  "--toolchain", tl.TOOLCHAINS / "aarch64-linux-gnu.cmake"], env=tl.clean_env())
    assert res.returncode != 0
    assert "probe configure failed" in res.stdout
    assert "did not run on this host" in tl.flat(res.stdout)
    assert not out.exists()
