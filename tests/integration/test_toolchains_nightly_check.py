"""reframe-tests/checks/cross_aarch64.py, the nightly cross build, as ReFrame generates its
job (dry run, on the local partition): the native and the aarch64 build of the stack, the
round trip under qemu with both builds compared, and the one-bit negative control.
Running it takes longer than CI allows (see toolchains/README.md for the times)."""
from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
REFRAME = pathlib.Path(os.environ.get("IOSTACK_VENV", REPO / ".venv")) / "bin" / "reframe"
LMOD_CMD = "/usr/share/lmod/lmod/libexec/lmod"


@pytest.mark.skipif(not REFRAME.exists() or not pathlib.Path(LMOD_CMD).exists(),
                    reason="ReFrame (the venv) or Lmod missing")
def test_dry_run_generates_the_cross_build_job(tmp_path):
    env = dict(os.environ, IOSTACK_RFM_STATE=str(tmp_path / "state"), LMOD_CMD=LMOD_CMD)
    res = subprocess.run(
        [REFRAME, "-C", REPO / "reframe-tests/config/local.py", "-c",
         REPO / "reframe-tests/checks/cross_aarch64.py", "--prefix", tmp_path,
         # the partition feature `cross-aarch64` is the site's to declare
         "-S", "valid_systems=local:default",
         # Debian's libraries: the `stack` environment needs a deployed stack's modules
         "-S", "valid_prog_environs=builtin", "--dry-run"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert res.returncode == 0, res.stdout
    assert "CrossAarch64StackCheck" in res.stdout
    job = next(tmp_path.rglob("CrossAarch64StackCheck/rfm_job.sh")).read_text()
    toolchains = REPO / "toolchains"
    assert "build_stack.py --work native --prefix native/prefix" in job
    assert (f"--toolchain {toolchains}/aarch64-linux-gnu.cmake "
            f"--preseed {toolchains}/preseed/aarch64-linux-gnu.cmake --prefix-path \"$overlay\"") in job
    assert "debian-dev-overlay.sh overlay" in job
    assert ("--expect 42 --build native=native/prefix "
            "--build 'aarch64=aarch64/prefix@qemu-aarch64 -L /usr/aarch64-linux-gnu "
            "-E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib'") in job
    assert "gribcompare flip-bit flipped.grib --message 5" in job
