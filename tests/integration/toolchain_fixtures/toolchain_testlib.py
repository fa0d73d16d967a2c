"""Helpers shared by tests/integration/test_toolchains_*.py (loaded by file path,
so the tests do not depend on how pytest sets up sys.path)."""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]
TOOLCHAINS = REPO / "toolchains"
PRESEED = TOOLCHAINS / "preseed"
PROBE = PRESEED / "probe"
CRAYPE_BIN = HERE / "craype" / "bin"
AARCH64_SYSROOT = "/usr/aarch64-linux-gnu"

EM_X86_64 = 62
EM_AARCH64 = 183


def missing(*programs: str) -> list[str]:
    return [p for p in programs if shutil.which(p) is None]


def run(cmd, cwd=None, env=None, timeout=600) -> subprocess.CompletedProcess:
    """Run a command, stdout and stderr merged into .stdout (text)."""
    return subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, timeout=timeout,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def ecbuild_configure(src, build: pathlib.Path, *, toolchain=None, preseed=None,
                      cmake_args=(), env=None) -> subprocess.CompletedProcess:
    """ecbuild [--toolchain=..] -- [-C preseed] [args] src, in build/."""
    build.mkdir(parents=True, exist_ok=True)
    cmd = ["ecbuild"]
    if toolchain:
        cmd.append(f"--toolchain={toolchain}")
    cmd.append("--")
    if preseed:
        cmd += ["-C", str(preseed)]
    cmd += list(cmake_args) + [str(src)]
    return run(cmd, cwd=build, env=env)


def build(build_dir: pathlib.Path, env=None, target=None) -> subprocess.CompletedProcess:
    cmd = ["cmake", "--build", str(build_dir), "-j2"]
    if target:
        cmd += ["--target", target]
    return run(cmd, env=env)


def elf_machine(path: pathlib.Path) -> int:
    """e_machine of a little-endian ELF file (EM_AARCH64 = 183, EM_X86_64 = 62)."""
    head = pathlib.Path(path).read_bytes()[:20]
    assert head[:4] == b"\x7fELF", f"{path} is not an ELF file"
    assert head[5] == 1, f"{path} is not little endian"
    return int.from_bytes(head[18:20], "little")


# As the toolchain's CMAKE_CROSSCOMPILING_EMULATOR: the root's loader with the root's libc.
QEMU = ["qemu-aarch64", "-L", AARCH64_SYSROOT, "-E", f"LD_LIBRARY_PATH={AARCH64_SYSROOT}/lib"]


def qemu(path, env=None) -> subprocess.CompletedProcess:
    return run([*QEMU, path], env=env)


_REPORT = re.compile(r"^(\w+) configured=(-?\d+) runtime=(-?\d+)$", re.M)


def parse_report(text: str) -> dict[str, tuple[int, int]]:
    """'NAME configured=X runtime=Y' lines of the probe reports."""
    return {m[1]: (int(m[2]), int(m[3])) for m in _REPORT.finditer(text)}


_SET = re.compile(r'^set\((\w+) "([^"]*)" CACHE INTERNAL "[^"]*"\)$', re.M)


def parse_preseed(path) -> dict[str, str]:
    """Ordered name -> value of a pre-seed file."""
    return dict(_SET.findall(pathlib.Path(path).read_text()))


def clean_env(**extra: str) -> dict[str, str]:
    """The test process environment without variables that would steer the
    builds (compilers, Cray PE), plus extra."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"CC", "CXX", "FC", "F77", "F90", "CFLAGS", "CXXFLAGS", "FFLAGS",
                        "LDFLAGS", "PE_ENV", "CRAY_LD_LIBRARY_PATH", "CRAYPE_LINK_TYPE",
                        "ECBUILD_TOOLCHAIN", "CMAKE_TOOLCHAIN_FILE", "LD_LIBRARY_PATH",
                        "IOSTACK_RUN_MARKER", "IOSTACK_RUN_MARKER_OBJ", "IOSTACK_WRAPPER_LOG",
                        "OMP_NUM_THREADS"}}
    env.update(extra)
    return env


def flat(text: str) -> str:
    """Whitespace-normalised text: CMake wraps message() output at ~80 columns."""
    return " ".join(text.split())
