"""The checks' GRIB input, written by the environment's ecCodes (`python3 -m
iostack_rfm.jobs.gribgen`: grib_filter on its GRIB2 sample), is byte for byte what gribgen.c
(ecCodes' C API, the program the aarch64 cross check builds) writes; and ecCodes reads it
back as the fields it names."""
import os
import shutil
import subprocess
import sys

import pytest

from iostack.core import paths

pytestmark = pytest.mark.skipif(not shutil.which("grib_filter"), reason="ecCodes tools not installed")


def gribgen_py(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(paths.REFRAME_DIR)}
    return subprocess.run([sys.executable, "-m", "iostack_rfm.jobs.gribgen", *map(str, args)],
                          cwd=cwd, env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def gribgen_c(tmp_path_factory):
    exe = tmp_path_factory.mktemp("gribgen") / "gribgen"
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(paths.RFM_SRC / "gribgen" / "gribgen.c"),
                    "-leccodes", "-lm"], check=True)
    return exe


@pytest.mark.parametrize("sizes", [(), (2, 6), (1, 1, 91, 180)])
def test_same_bytes_as_the_c_program(gribgen_c, tmp_path, sizes):
    c = subprocess.run([str(gribgen_c), "c.grib", *map(str, sizes)], cwd=tmp_path,
                       capture_output=True, text=True, check=True)
    py = gribgen_py("py.grib", *sizes, cwd=tmp_path)
    assert py.returncode == 0, py.stderr
    assert py.stdout == c.stdout          # gribgen: messages=N bytes=B
    assert (tmp_path / "py.grib").read_bytes() == (tmp_path / "c.grib").read_bytes()


def test_the_first_fields_only(tmp_path):
    p = gribgen_py("one.grib", 1, 1, "--count", 1, cwd=tmp_path)
    assert p.stdout.startswith("gribgen: messages=1 ")
    keys = subprocess.run(["grib_get", "-p", "levtype,level,paramId,step,Ni,Nj,bitsPerValue",
                           "one.grib"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert keys.split() == ["pl", "1000", "130", "0", "72", "37", "16"]


def test_bad_sizes_are_one_line(tmp_path):
    p = gribgen_py("x.grib", 1, 9, cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip() == "gribgen: need NSTEPS>=1, 1<=NLEVELS<=6, NLAT,NLON>=2"
    assert not (tmp_path / "x.grib").exists()
