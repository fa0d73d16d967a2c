"""The fast form of the aarch64 cross build (issue 15), on the real eckit 1.28.8 source:
configure plus a few objects. The full stack (eckit, metkit, FDB), run under qemu and
compared with a native build, is the nightly check reframe-tests/checks/cross_aarch64.py.

Sources come from the Spack source mirror, found by the sha256 the recipes pin
(toolchains/build_stack.py). What [OIFS-HECToR] met on the Cray login node shows here as a
configure that believes it is native: without the toolchain file, eckit's configure
reports the build host's processor and adopts the host's x86_64 libcurl for an aarch64
library, which the aarch64 linker then rejects."""
from __future__ import annotations

import importlib.util
import pathlib
import re

import pytest


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tl = _load("toolchain_testlib", pathlib.Path(__file__).parent / "toolchain_fixtures" / "toolchain_testlib.py")
build_stack = _load("build_stack", tl.TOOLCHAINS / "build_stack.py")

TOOLCHAIN = tl.TOOLCHAINS / "aarch64-linux-gnu.cmake"
PRESEED = tl.PRESEED / "aarch64-linux-gnu.cmake"
# A few of libeckit's objects: its entry point, I/O and a numeric type.
OBJECTS = ("runtime/Main.cc.o", "io/FileHandle.cc.o", "types/FloatCompare.cc.o")

_missing = tl.missing("cmake", "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++", "qemu-aarch64", "make")
pytestmark = pytest.mark.skipif(bool(_missing), reason=f"aarch64 cross tools missing: {_missing}")


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """eckit's source and an installed ecbuild 3.7.2, both from the mirror."""
    work = tmp_path_factory.mktemp("eckit-cross")
    try:
        build_stack.mirror()
    except build_stack.BuildError as e:
        pytest.skip(str(e))
    prefix = work / "host"
    build_stack.build_package("ecbuild", work, prefix)
    return work, build_stack.unpack("eckit", work), prefix


def _configure(sources, name, *args):
    work, src, ecbuild_prefix = sources
    build = work / name
    res = tl.run(["cmake", "-S", src, "-B", build, f"-DCMAKE_PREFIX_PATH={ecbuild_prefix}",
                  "-DENABLE_TESTS=OFF", *args], env=tl.clean_env())
    cache = (build / "CMakeCache.txt").read_text() if (build / "CMakeCache.txt").exists() else ""
    return build, res.stdout, cache


def _cached_libraries(cache: str) -> dict[str, str]:
    """Cache entries that name a shared library or archive file."""
    found = {}
    for name, value in re.findall(r"^(\w+):(?:FILEPATH|STRING|INTERNAL)=(.*)$", cache, re.M):
        for item in value.split(";"):
            if re.search(r"\.(so(\.\d+)*|a)$", item) and pathlib.Path(item).is_file():
                found[f"{name}={item}"] = item
    return found


def _machines(libraries: dict[str, str]) -> dict[str, int]:
    return {k: tl.elf_machine(pathlib.Path(v).resolve()) for k, v in libraries.items()
            if pathlib.Path(v).resolve().read_bytes()[:4] == b"\x7fELF"}


def test_bare_cross_configure_believes_it_is_native(sources, tmp_path):
    """aarch64 compilers, no toolchain file: the configure 'succeeds' with host answers."""
    build, out, cache = _configure(sources, "bare", "-DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc",
                                   "-DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++")
    assert "Generating done" in out, out
    system = next((build / "CMakeFiles").glob("*/CMakeSystem.cmake")).read_text()
    assert 'set(CMAKE_CROSSCOMPILING "FALSE")' in system
    assert "processor        : [x86_64]" in out          # ecbuild's summary: the build host
    # The host's x86_64 libcurl (found through the host's pkg-config) for an aarch64 eckit.
    assert re.search(r"Found CURL: /usr/lib/x86_64-linux-gnu/libcurl\.so", out), out
    host_libs = {k for k, m in _machines(_cached_libraries(cache)).items() if m == tl.EM_X86_64}
    assert any(k.startswith("CURL_LIBRARY") for k in host_libs), host_libs
    # What the build then meets: the aarch64 linker refuses the adopted library.
    curl = next(v for k, v in _cached_libraries(cache).items() if k.startswith("CURL_LIBRARY"))
    (tmp_path / "x.c").write_text("int f(void) { return 0; }\n")
    link = tl.run(["aarch64-linux-gnu-gcc", "-shared", "-fPIC", tmp_path / "x.c", curl,
                   "-o", tmp_path / "libx.so"])
    assert link.returncode != 0
    assert "file in wrong format" in link.stdout, link.stdout


@pytest.fixture(scope="module")
def toolchain_build(sources):
    build, out, cache = _configure(sources, "toolchain", f"-DCMAKE_TOOLCHAIN_FILE={TOOLCHAIN}",
                                   "-C", str(PRESEED), "-DCMAKE_BUILD_TYPE=Bit")
    assert "Generating done" in out, out
    return build, out, cache


def test_toolchain_configure_sees_the_target(toolchain_build):
    build, out, cache = toolchain_build
    assert "processor        : [aarch64]" in out
    assert "Could NOT find CURL" in out                  # no aarch64 libcurl here
    machines = _machines(_cached_libraries(cache))
    assert machines and set(machines.values()) == {tl.EM_AARCH64}, machines
    # The pre-seeded answers replaced the checks: none ran, the cache holds the file's values.
    assert "Check size of time_t" not in out and "Check size of void*" not in out
    seeded = tl.parse_preseed(PRESEED)
    for name in ("ECKIT_SIZEOF_TIME_T", "CMAKE_SIZEOF_VOID_P", "EC_SIZEOF_OFF_T"):
        assert re.search(rf"^{name}:INTERNAL={seeded[name]}$", cache, re.M), name


def test_toolchain_builds_aarch64_objects_with_bit_flags(toolchain_build):
    build, *_ = toolchain_build
    # eckit's persistent-object headers (*.b) are generated on the host first (sg.pl)
    rules = (build / "src/eckit/CMakeFiles/eckit.dir/build.make").read_text()
    generated = sorted(set(re.findall(r"^(src/eckit/\S+\.b): ", rules, re.M)))
    assert generated, "no generated .b headers"
    res = tl.run(["make", "-C", build, "-f", "src/eckit/CMakeFiles/eckit.dir/build.make", *generated],
                 env=tl.clean_env())
    assert res.returncode == 0, res.stdout[-3000:]
    res = tl.run(["make", "-C", build / "src" / "eckit", *OBJECTS, "VERBOSE=1"], env=tl.clean_env())
    assert res.returncode == 0, res.stdout[-3000:]
    compiles = [ln for ln in res.stdout.splitlines() if "aarch64-linux-gnu-g++" in ln and " -c " in ln]
    assert len(compiles) == len(OBJECTS), compiles
    for line in compiles:
        assert "-mcpu=neoverse-n1" in line and "-O2 -ffp-contract=off -DNDEBUG" in line, line
    for obj in OBJECTS:
        path = build / "src" / "eckit" / "CMakeFiles" / "eckit.dir" / obj
        assert tl.elf_machine(path) == tl.EM_AARCH64, path


def test_eckit_own_checks_agree_with_the_preseed(sources):
    """Without -C and without the emulator, eckit's and ecbuild's own checks compute these
    on the target's compiler: the pre-seeded values are theirs. That configure runs no test
    program: a plain try_run would stop it, and ecbuild_try_run leaves <source file>.bin
    (CheckTypeSize's and the compiler ABI's .bin are compiled, never run)."""
    build, out, cache = _configure(sources, "unseeded", f"-DCMAKE_TOOLCHAIN_FILE={TOOLCHAIN}",
                                   "-DIOSTACK_USE_EMULATOR=OFF")
    assert "Generating done" in out, out
    kept = [p for pat in ("*.c.bin", "*.cxx.bin", "*.F90.bin") for p in build.rglob(pat)]
    assert not kept, kept
    assert "Check size of time_t - done" in out
    seeded = tl.parse_preseed(PRESEED)
    for name in ("ECKIT_SIZEOF_TIME_T", "CMAKE_SIZEOF_VOID_P", "EC_SIZEOF_OFF_T"):
        assert re.search(rf"^{name}:INTERNAL={seeded[name]}$", cache, re.M), name


def test_target_eccodes_from_debian_arm64_packages(tmp_path):
    """ecCodes for the target: the unpacked libeccodes-dev:arm64 (debian-dev-overlay.sh) for
    its CMake package and headers, libeccodes0:arm64 (apt, multiarch) at run time. A program
    built against it with the toolchain runs under qemu and reports Debian's ecCodes."""
    if not pathlib.Path("/usr/lib/aarch64-linux-gnu/libeccodes.so.0").exists():
        pytest.skip("libeccodes0:arm64 not installed (system-packages.toml, nightly; bin/iostack setup --with nightly)")
    overlay = tl.run(["bash", tl.TOOLCHAINS / "debian-dev-overlay.sh", tmp_path / "overlay"])
    assert overlay.returncode == 0, overlay.stdout
    prefix = overlay.stdout.strip().splitlines()[-1]
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(useeccodes C)\n"
        "find_package(eccodes 2.28 REQUIRED)\nadd_executable(useeccodes main.c)\n"
        "target_link_libraries(useeccodes eccodes)\n")
    (src / "main.c").write_text('#include <eccodes.h>\n#include <stdio.h>\n'
                                'int main(void) { printf("eccodes %ld\\n", codes_get_api_version()); return 0; }\n')
    conf = tl.run(["cmake", "-S", src, "-B", tmp_path / "b", f"-DCMAKE_TOOLCHAIN_FILE={TOOLCHAIN}",
                   f"-DCMAKE_PREFIX_PATH={prefix}"], env=tl.clean_env())
    assert conf.returncode == 0, conf.stdout
    built = tl.build(tmp_path / "b", env=tl.clean_env())
    assert built.returncode == 0, built.stdout      # eccodes.h is in include/aarch64-linux-gnu
    exe = tmp_path / "b" / "useeccodes"
    assert tl.elf_machine(exe) == tl.EM_AARCH64
    ran = tl.qemu(exe)
    assert ran.returncode == 0 and ran.stdout.strip() == "eccodes 22800", ran.stdout
