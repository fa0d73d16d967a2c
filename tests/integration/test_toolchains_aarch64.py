"""Real aarch64 cross builds with toolchains/aarch64-linux-gnu.cmake: Debian's
aarch64 cross gcc/g++/gfortran, qemu-user, ecbuild 3.7.

Both fixture projects compute target-specific answers at configure time
(char signedness, long double mantissa/precision) which differ between the
x86_64 build host and aarch64, so a configure that ran its test programs on
the host, or used host answers, is caught."""
from __future__ import annotations

import importlib.util
import pathlib
import re

import pytest

_spec = importlib.util.spec_from_file_location(
    "toolchain_testlib", pathlib.Path(__file__).parent / "toolchain_fixtures" / "toolchain_testlib.py")
tl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tl)

TOOLCHAIN = tl.TOOLCHAINS / "aarch64-linux-gnu.cmake"
PRESEED = tl.PRESEED / "aarch64-linux-gnu.cmake"
TRYCHECK = tl.HERE / "trycheck"

_missing = tl.missing("cmake", "ecbuild", "gcc", "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++",
                      "aarch64-linux-gnu-gfortran", "qemu-aarch64", "file")
pytestmark = pytest.mark.skipif(bool(_missing), reason=f"aarch64 cross tools missing: {_missing}")

# Answers of the aarch64 Linux ABI (and, for contrast, of x86_64).
AARCH64 = {"char_signed": 0, "ldbl_mant_dig": 113, "ldbl_precision": 33}
X86_64 = {"char_signed": 1, "ldbl_mant_dig": 64, "ldbl_precision": 18}


def _assert_aarch64_elf(path: pathlib.Path):
    assert tl.elf_machine(path) == tl.EM_AARCH64
    out = tl.run(["file", "-b", path]).stdout
    assert "ARM aarch64" in out, out


# ---- plain CMake project with try_run ------------------------------------------

def test_trycheck_without_emulator_refuses_to_configure(tmp_path):
    res = tl.run(["cmake", "-S", TRYCHECK, "-B", tmp_path / "b",
                  f"-DCMAKE_TOOLCHAIN_FILE={TOOLCHAIN}", "-DIOSTACK_USE_EMULATOR=OFF"],
                 env=tl.clean_env())
    assert res.returncode != 0, res.stdout
    assert re.search(r"try_run\(\) invoked in cross-compiling mode", res.stdout, re.I), res.stdout
    assert "TRYCHECK_C_RUN" in res.stdout
    # The only result CMake could offer is its placeholder, not a host answer.
    assert "PLEASE_FILL_OUT-FAILED_TO_RUN" in res.stdout
    assert "trycheck: char_signed" not in res.stdout


@pytest.fixture(scope="module")
def trycheck_build(tmp_path_factory):
    bdir = tmp_path_factory.mktemp("trycheck") / "b"
    conf = tl.run(["cmake", "-S", TRYCHECK, "-B", bdir, f"-DCMAKE_TOOLCHAIN_FILE={TOOLCHAIN}"],
                  env=tl.clean_env())
    assert conf.returncode == 0, conf.stdout
    built = tl.build(bdir, env=tl.clean_env())
    assert built.returncode == 0, built.stdout
    return bdir, conf.stdout


def test_trycheck_with_emulator_configures_with_target_answers(trycheck_build):
    bdir, out = trycheck_build
    want = AARCH64
    assert (f"trycheck: char_signed={want['char_signed']} ldbl_mant_dig={want['ldbl_mant_dig']} "
            f"ldbl_precision={want['ldbl_precision']}") in out
    cache = (bdir / "CMakeCache.txt").read_text()
    assert re.search(r"^IOSTACK_QEMU_AARCH64:FILEPATH=.*qemu-aarch64", cache, re.M)


def test_host_packages_are_not_found_for_the_target(trycheck_build):
    # libeckit-dev on this host ships an x86_64 eckit CMake package; the
    # cross configure must not pick it up (a native configure does).
    if not pathlib.Path("/usr/lib/x86_64-linux-gnu/cmake/eckit").is_dir():
        pytest.skip("no host eckit package to be confused with")
    _, out = trycheck_build
    assert "trycheck: eckit_FOUND=0" in out


def test_trycheck_host_answers_differ_from_target(tmp_path):
    # The same probe built and run natively gives the x86_64 answers, so the
    # values above can only have come from running on (emulated) aarch64.
    exe = tmp_path / "probe_native"
    res = tl.run(["gcc", TRYCHECK / "probe_target.c", "-o", exe])
    assert res.returncode == 0, res.stdout
    out = tl.run([exe]).stdout
    assert f"char_signed={X86_64['char_signed']}" in out
    assert f"ldbl_mant_dig={X86_64['ldbl_mant_dig']}" in out


def test_trycheck_binaries_are_aarch64_and_agree_under_qemu(trycheck_build):
    bdir, _ = trycheck_build
    for name in ("report_c", "report_f"):
        _assert_aarch64_elf(bdir / name)
    c = tl.qemu(bdir / "report_c")
    assert c.returncode == 0, c.stdout
    line = f"char_signed={AARCH64['char_signed']} ldbl_mant_dig={AARCH64['ldbl_mant_dig']}"
    assert f"configured {line}" in c.stdout
    assert f"runtime {line}" in c.stdout
    f = tl.qemu(bdir / "report_f")
    assert f.returncode == 0, f.stdout
    assert f"configured ldbl_precision={AARCH64['ldbl_precision']}" in f.stdout
    assert f"runtime ldbl_precision={AARCH64['ldbl_precision']}" in f.stdout


# ---- ecbuild project (the pre-seed probe) ------------------------------------------

def test_ecbuild_probe_without_preseed_fails_despite_emulator(tmp_path):
    # The toolchain sets CMAKE_CROSSCOMPILING_EMULATOR, but ecbuild_try_run
    # executes check programs directly: the aarch64 binary cannot run here.
    res = tl.ecbuild_configure(tl.PROBE, tmp_path / "b", toolchain=TOOLCHAIN, env=tl.clean_env())
    assert res.returncode != 0, res.stdout
    out = tl.flat(res.stdout)
    assert "the test program of IOSTACK_RAN_PROCFS did not run on this host" in out, res.stdout
    assert "ignores CMAKE_CROSSCOMPILING_EMULATOR" in out


@pytest.fixture(scope="module")
def probe_build(tmp_path_factory):
    bdir = tmp_path_factory.mktemp("probe") / "b"
    conf = tl.ecbuild_configure(tl.PROBE, bdir, toolchain=TOOLCHAIN, preseed=PRESEED, env=tl.clean_env())
    assert conf.returncode == 0, conf.stdout
    built = tl.build(bdir, env=tl.clean_env())
    assert built.returncode == 0, built.stdout
    return bdir, conf.stdout


def test_ecbuild_probe_with_preseed_builds_no_check_program(probe_build):
    bdir, out = probe_build
    # ecbuild_try_run keeps each check program as <source file>.bin;
    # check_c_source_runs logs its checks.
    kept = [p for pat in ("*.c.bin", "*.F90.bin", "*.cxx.bin") for p in bdir.rglob(pat)]
    assert not kept, kept
    assert "Performing Test IEEE" not in out
    # ecbuild's Fortran feature checks are not pre-seeded: CROSS_COMPILING makes them
    # compile for the target without running (no .bin above) and they pass.
    assert "Checking Fortran support for \"submodules\" -- works" in tl.flat(out)
    cache = (bdir / "CMakeCache.txt").read_text()
    assert "IOSTACK_LDBL_MANT_DIG:INTERNAL=113\n" in cache
    assert "HAS_Fortran_SUBMODULES:INTERNAL=TRUE\n" in cache


def test_ecbuild_probe_binaries_confirm_preseed_under_qemu(probe_build):
    bdir, _ = probe_build
    exes = [bdir / "iostack_probe_report", bdir / "iostack_probe_report_f"]
    for exe in exes:
        _assert_aarch64_elf(exe)
    values = {}
    for exe in exes:
        res = tl.qemu(exe)
        assert res.returncode == 0, res.stdout
        values.update(tl.parse_report(res.stdout))
    # Every pre-seeded answer that the target can recompute agrees with it.
    assert len(values) >= 25, values
    wrong = {k: v for k, v in values.items() if v[0] != v[1]}
    assert not wrong, wrong
    assert values["IOSTACK_LDBL_MANT_DIG"] == (113, 113)
    # gfortran's real(c_long_double) is the C ABI's long double (113 bits: 33 digits)
    assert values["IOSTACK_Fortran_LDBL_PRECISION"] == (33, 33)
    assert values["EC_SIZEOF_LONG_DOUBLE"] == (16, 16)
    assert values["EC_LITTLE_ENDIAN"] == (1, 1)
    assert values["IEEE_LE"] == (1, 1)
    assert values["CMAKE_SIZEOF_VOID_P"] == (8, 8)


def test_bit_build_type_flags_reach_the_compiler(tmp_path):
    res = tl.ecbuild_configure(tl.PROBE, tmp_path / "b", toolchain=TOOLCHAIN, preseed=PRESEED,
                               cmake_args=["-DCMAKE_BUILD_TYPE=Bit"], env=tl.clean_env())
    assert res.returncode == 0, res.stdout
    built = tl.run(["cmake", "--build", tmp_path / "b", "-j2", "--", "VERBOSE=1"], env=tl.clean_env())
    assert built.returncode == 0, built.stdout
    c_compile = [ln for ln in built.stdout.splitlines() if "aarch64-linux-gnu-gcc" in ln and " -c " in ln]
    f_compile = [ln for ln in built.stdout.splitlines() if "aarch64-linux-gnu-gfortran" in ln and " -c " in ln]
    assert c_compile and f_compile
    for line in c_compile:
        assert "-O2 -ffp-contract=off -DNDEBUG" in line, line
        assert "-mcpu=neoverse-n1" in line, line
    for line in f_compile:
        assert "-O2 -ffp-contract=off -fno-range-check -fconvert=big-endian -DNDEBUG" in line, line


def test_emulator_runs_the_target_root_loader_with_its_own_libc(tmp_path):
    """The toolchain's CMAKE_CROSSCOMPILING_EMULATOR (which CMake puts in front of target
    programs run at build time) loads libc.so.6 from the same glibc build as the loader. With
    Debian's libc6:arm64 installed, the loader alone takes /usr/lib/aarch64-linux-gnu's, and
    the aarch64 fdb-read then hung."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "maps.c").write_text(
        '#include <stdio.h>\n#include <string.h>\nint main(void) { char l[512];\n'
        '  FILE *f = fopen("/proc/self/maps", "r");\n'
        '  while (fgets(l, sizeof l, f)) if (strstr(l, "libc.so.6") || strstr(l, "ld-linux-aarch64"))\n'
        '    fputs(strchr(l, 47), stdout);\n  return 0; }\n')
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(maps C)\nadd_executable(maps maps.c)\n"
        "add_custom_command(OUTPUT maps.txt COMMAND maps > maps.txt DEPENDS maps)\n"
        "add_custom_target(run ALL DEPENDS maps.txt)\n")
    conf = tl.run(["cmake", "-S", src, "-B", tmp_path / "b", f"-DCMAKE_TOOLCHAIN_FILE={TOOLCHAIN}"],
                  env=tl.clean_env())
    assert conf.returncode == 0, conf.stdout
    built = tl.build(tmp_path / "b", env=tl.clean_env())
    assert built.returncode == 0, built.stdout
    mapped = {pathlib.Path(p) for p in (tmp_path / "b" / "maps.txt").read_text().split()}
    loader = {p.parent for p in mapped if p.name.startswith("ld-linux")}
    libc = {p.parent for p in mapped if p.name == "libc.so.6"}
    assert loader == libc == {pathlib.Path(tl.AARCH64_SYSROOT) / "lib"}, mapped
