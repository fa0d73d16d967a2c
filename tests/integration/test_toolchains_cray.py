"""toolchains/cray-cce.cmake and cray-gnu.cmake with stand-in cc/CC/ftn wrappers
(toolchain_fixtures/craype/bin: forward to gcc/g++/gfortran, log every call).

Every executable the stand-ins link carries toolchain_fixtures/craype/marker.c:
started while IOSTACK_RUN_MARKER is set (configure step only), it appends its
path to that file. An empty marker after configure means no configure-time
test program ran; the control test shows the marker does fill up when one
does."""
from __future__ import annotations

import importlib.util
import pathlib
import re

import pytest

_spec = importlib.util.spec_from_file_location(
    "toolchain_testlib", pathlib.Path(__file__).parent / "toolchain_fixtures" / "toolchain_testlib.py")
tl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tl)

CRAYAPP = tl.HERE / "crayapp"
PRESEED = tl.PRESEED / "cray-ex-zen2.cmake"
# Spack passes its dependencies' library directories this way.
SPACK_DEP_LIB = "/opt/spack/opt/linux-zen2/netcdf-c/lib"

_missing = tl.missing("cmake", "ecbuild", "gcc", "g++", "gfortran", "readelf")
pytestmark = pytest.mark.skipif(bool(_missing), reason=f"build tools missing: {_missing}")

# What each toolchain must put on the command lines.
EXPECT = {
    "cce": {
        "pe_env": "CRAY",
        "bit": {"cc": "-O2 -ffp-contract=off -DNDEBUG",
                "ftn": "-O2 -hfp1 -hflex_mp=conservative -hadd_paren -DNDEBUG"},
        "omp": {"cc": "-fopenmp", "ftn": "-homp"},
    },
    "gnu": {
        "pe_env": "GNU",
        "bit": {"cc": "-O2 -ffp-contract=off -DNDEBUG",
                "ftn": "-O2 -ffp-contract=off -fno-range-check -fconvert=big-endian -DNDEBUG"},
        "omp": {"cc": "-fopenmp", "ftn": "-fopenmp"},
    },
}


class CrayPE:
    """A fake Cray PE login environment in tmp: stand-ins first on PATH."""

    def __init__(self, root: pathlib.Path, pe_env: str):
        self.root = root
        self.log = root / "wrapper.log"
        self.marker = root / "ran-at-configure.txt"
        self.pe_lib = root / "opt-cray-pe" / "lib64"
        self.pe_lib.mkdir(parents=True)
        marker_obj = root / "marker.o"
        res = tl.run(["gcc", "-fPIC", "-c", tl.HERE / "craype" / "marker.c", "-o", marker_obj])
        assert res.returncode == 0, res.stdout
        import os
        self.env = tl.clean_env(
            PATH=f"{tl.CRAYPE_BIN}{os.pathsep}{os.environ['PATH']}",
            PE_ENV=pe_env,
            CRAY_LD_LIBRARY_PATH=str(self.pe_lib),
            IOSTACK_WRAPPER_LOG=str(self.log),
            IOSTACK_RUN_MARKER_OBJ=str(marker_obj),
        )

    def configure_env(self):
        return dict(self.env, IOSTACK_RUN_MARKER=str(self.marker))

    def calls(self, name: str) -> list[list[str]]:
        """argv of every logged call of cc/CC/ftn."""
        out = []
        for line in self.log.read_text().splitlines():
            fields = line.split("\t")
            if fields[0] == name:
                out.append(fields[1:])
        return out

    def ran_at_configure(self) -> list[str]:
        return self.marker.read_text().split() if self.marker.exists() else []


def _is_compile(argv):
    return "-c" in argv


def _output(argv):
    return argv[argv.index("-o") + 1] if "-o" in argv else ""


@pytest.fixture(scope="module", params=sorted(EXPECT))
def cray_build(request, tmp_path_factory):
    """Configure (toolchain + pre-seed, Bit), build and install crayapp."""
    pe = request.param
    root = tmp_path_factory.mktemp(f"cray-{pe}")
    craype = CrayPE(root, EXPECT[pe]["pe_env"])
    prefix = root / "prefix"
    conf = tl.ecbuild_configure(
        CRAYAPP, root / "build", toolchain=tl.TOOLCHAINS / f"cray-{pe}.cmake", preseed=PRESEED,
        cmake_args=["-DCMAKE_BUILD_TYPE=Bit", f"-DCMAKE_INSTALL_PREFIX={prefix}",
                    f"-DCMAKE_INSTALL_RPATH={SPACK_DEP_LIB}"],
        env=craype.configure_env())
    assert conf.returncode == 0, conf.stdout
    configure_log_lines = len(craype.log.read_text().splitlines())
    built = tl.build(root / "build", env=craype.env)
    assert built.returncode == 0, built.stdout
    inst = tl.run(["cmake", "--install", root / "build"], env=craype.env)
    assert inst.returncode == 0, inst.stdout
    return pe, craype, conf.stdout, prefix, root / "build", configure_log_lines


def test_configure_executes_no_test_program(cray_build):
    pe, craype, out, *_ = cray_build
    assert craype.ran_at_configure() == []
    # The answers are the pre-seeded ones, and the wrappers were really used.
    assert "crayapp: IOSTACK_LDBL_MANT_DIG=64 EC_HAVE_PROCFS=1" in out
    assert craype.calls("cc") and craype.calls("CC") and craype.calls("ftn")
    # ecbuild's Fortran feature checks are left to the compiler in use: they compiled
    # with ftn (CROSS_COMPILING) and ran nothing (the marker above is empty).
    assert 'Checking Fortran support for "submodules" -- works' in tl.flat(out)


def test_openmp_flags_preset(cray_build):
    pe, craype, out, *_ = cray_build
    omp = EXPECT[pe]["omp"]
    assert (f"crayapp: OMP_C_FLAGS={omp['cc']} OMP_CXX_FLAGS={omp['cc']} "
            f"OMP_Fortran_FLAGS={omp['ftn']}") in out


def test_build_lines_carry_bit_openmp_link_and_rpath_flags(cray_build):
    pe, craype, _, prefix, bdir, nconf = cray_build
    want = EXPECT[pe]
    lines = craype.log.read_text().splitlines()[nconf:]  # build and install only
    calls = [line.split("\t") for line in lines]
    cc = [c[1:] for c in calls if c[0] == "cc"]
    ftn = [c[1:] for c in calls if c[0] == "ftn"]

    cc_compiles = [a for a in cc if _is_compile(a)]
    ftn_compiles = [a for a in ftn if _is_compile(a)]
    assert len(cc_compiles) == 2 and len(ftn_compiles) == 1, (cc_compiles, ftn_compiles)
    for argv in cc_compiles:
        assert want["bit"]["cc"] in " ".join(argv)
        assert want["omp"]["cc"] in argv  # both C sources see OpenMP::OpenMP_C
    assert want["bit"]["ftn"] in " ".join(ftn_compiles[0])
    assert want["omp"]["ftn"] in ftn_compiles[0]

    links = {pathlib.Path(_output(a)).name: a for a in cc + ftn if not _is_compile(a)}
    exe_c, exe_f, lib = links["crayapp_c"], links["crayapp_f"], links["libcrayapp_threads.so"]
    # OpenMP flag on the link lines too (the runtime comes with it).
    assert want["omp"]["cc"] in exe_c and want["omp"]["cc"] in lib
    assert want["omp"]["ftn"] in exe_f
    # Dynamic executables, stated to the wrapper.
    assert "-dynamic" in exe_c and "-dynamic" in exe_f
    # Build-tree RPATH includes the PE library directory of the "loaded modules".
    for argv in (exe_c, exe_f, lib):
        rpaths = [a for a in argv if a.startswith("-Wl,-rpath,")]
        assert rpaths and str(craype.pe_lib) in rpaths[0], argv


def test_installed_binaries_have_absolute_rpath_and_run_openmp(cray_build):
    pe, craype, _, prefix, *_ = cray_build
    for exe in ("crayapp_c", "crayapp_f"):
        dyn = tl.run(["readelf", "-d", prefix / "bin" / exe]).stdout
        m = re.search(r"\((?:RPATH|RUNPATH)\)\s+Library r(?:un)?path: \[([^\]]*)\]", dyn)
        assert m, dyn
        rpath = m[1].split(":")
        assert str(prefix / "lib") in rpath and str(craype.pe_lib) in rpath, rpath
        assert SPACK_DEP_LIB in rpath, rpath
        assert not any("$ORIGIN" in p for p in rpath), rpath
    # Run outside the build tree, no LD_LIBRARY_PATH: libcrayapp_threads.so is
    # found through the RPATH, and the regions really run 3 threads.
    env = tl.clean_env(OMP_NUM_THREADS="3")
    c = tl.run([prefix / "bin" / "crayapp_c"], env=env)
    f = tl.run([prefix / "bin" / "crayapp_f"], env=env)
    assert c.returncode == 0 and f.returncode == 0, (c.stdout, f.stdout)
    assert c.stdout.strip() == "c_threads=3"
    assert f.stdout.strip() == "f_threads=3"


def test_without_preseed_checks_would_run_on_the_login_node(tmp_path):
    """Control: same toolchain, no -C. ecbuild's check programs run on the
    build host regardless of the toolchain (the marker fills up), and the
    plain CMake run check then stops the configure (CMake 3.25.1 crashes
    there instead of reporting the missing result)."""
    craype = CrayPE(tmp_path, "CRAY")
    res = tl.ecbuild_configure(CRAYAPP, tmp_path / "build", toolchain=tl.TOOLCHAINS / "cray-cce.cmake",
                               env=craype.configure_env())
    assert res.returncode != 0, res.stdout
    assert (re.search(r"try_run\(\) invoked in cross-compiling mode", res.stdout, re.I)
            or "Segmentation fault" in res.stdout), res.stdout
    ran = craype.ran_at_configure()
    assert any("test_IOSTACK_RAN_PROCFS.c.bin" in p for p in ran), ran
    assert any("test_IOSTACK_HAVE_LDBL_MANT_DIG.c.bin" in p for p in ran), ran


def test_toolchain_makes_plain_try_run_refuse(tmp_path):
    craype = CrayPE(tmp_path, "GNU")
    res = tl.run(["cmake", "-S", tl.HERE / "trycheck", "-B", tmp_path / "build",
                  f"-DCMAKE_TOOLCHAIN_FILE={tl.TOOLCHAINS / 'cray-gnu.cmake'}"],
                 env=craype.configure_env())
    assert res.returncode != 0, res.stdout
    assert re.search(r"try_run\(\) invoked in cross-compiling mode", res.stdout, re.I), res.stdout
    assert craype.ran_at_configure() == []
    # The stand-ins (not the host compilers) were the compilers.
    assert craype.calls("cc") and craype.calls("ftn")


def test_prgenv_mismatch_warns(tmp_path):
    craype = CrayPE(tmp_path, "GNU")
    res = tl.run(["cmake", "-S", tl.HERE / "trycheck", "-B", tmp_path / "build",
                  f"-DCMAKE_TOOLCHAIN_FILE={tl.TOOLCHAINS / 'cray-cce.cmake'}",
                  "-C", PRESEED],
                 env=craype.configure_env())
    assert "expects PrgEnv with PE_ENV=CRAY, but PE_ENV=GNU" in tl.flat(res.stdout)


def test_compilers_from_environment_take_precedence(tmp_path):
    # Spack sets CC/CXX/FC to its own wrappers around cc/CC/ftn; the
    # toolchain only falls back to cc/CC/ftn on PATH when nothing is chosen.
    craype = CrayPE(tmp_path, "GNU")
    env = dict(craype.configure_env(), PATH=tl.clean_env()["PATH"],
               CC=str(tl.CRAYPE_BIN / "cc"), CXX=str(tl.CRAYPE_BIN / "CC"), FC=str(tl.CRAYPE_BIN / "ftn"))
    res = tl.run(["cmake", "-S", tl.HERE / "trycheck", "-B", tmp_path / "build",
                  f"-DCMAKE_TOOLCHAIN_FILE={tl.TOOLCHAINS / 'cray-gnu.cmake'}"], env=env)
    cache = (tmp_path / "build" / "CMakeCache.txt").read_text()
    assert f"CMAKE_C_COMPILER:FILEPATH={tl.CRAYPE_BIN / 'cc'}\n" in cache, res.stdout
    assert f"CMAKE_Fortran_COMPILER:FILEPATH={tl.CRAYPE_BIN / 'ftn'}\n" in cache, res.stdout
    assert craype.calls("cc") and craype.calls("ftn")


def test_a_compiler_not_named_cc_gets_no_driver_options(tmp_path):
    """Spack's compiler wrappers are named after the compiler (gcc/gcc, cce/craycc) whatever
    they call, the drivers on cray-ex [EPCC-Spack], and gcc itself would read -dynamic as
    debugging options: the drivers' -dynamic stays off the link lines of a compiler not
    named cc; through the stand-in drivers it is there
    (test_build_lines_carry_bit_openmp_link_and_rpath_flags)."""
    env = dict(tl.clean_env(), CC="gcc", CXX="g++", FC="gfortran")
    res = tl.run(["cmake", "-S", CRAYAPP, "-B", tmp_path / "build",
                  f"-DCMAKE_TOOLCHAIN_FILE={tl.TOOLCHAINS / 'cray-gnu.cmake'}", "-C", PRESEED],
                 env=env)
    assert res.returncode == 0, res.stdout
    cache = (tmp_path / "build" / "CMakeCache.txt").read_text()
    assert re.search(r"^CMAKE_C_COMPILER:FILEPATH=.*/gcc$", cache, re.M), cache
    flags = re.search(r"^CMAKE_EXE_LINKER_FLAGS:STRING=(.*)$", cache, re.M).group(1)
    assert "-dynamic" not in flags.split()
