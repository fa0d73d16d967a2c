"""The OpenIFS check's bit-identity logic on this node, without the model: GRIB fields made
by gribgen (ecCodes) are laid out as an OpenIFS GRIB run writes them (ICMGG<exp>+<step>
grid-point and ICMSH<exp>+<step> spectral files per output step), archived into a real
FDB as the FDB run would, and compared by the job-side tool the check runs,
`python3 -m iostack_rfm.jobs.openifs compare-fdb`. Negative controls: a flipped bit, a
step FDB never got, a field FDB holds that no file has."""
import os
import re
import shutil
import subprocess

import pytest

from iostack.core import paths
from iostack_rfm.jobs import openifs

pytestmark = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("fdb-write", "fdb-read", "fdb-list", "grib_copy",
                                      "grib_compare", "gcc")),
    reason="needs FDB and ecCodes tools and gcc")

JOB_PYTHONPATH = paths.job_pythonpath()
STEPS = (0, 6, 12)
NLEVELS = 2
# gribgen: 4 pressure-level parameters on NLEVELS levels and 2 surface ones, per step
SH_PER_STEP, GG_PER_STEP = 4 * NLEVELS, 2


@pytest.fixture(scope="module")
def gribgen(tmp_path_factory):
    out = tmp_path_factory.mktemp("gribgen") / "gribgen"
    subprocess.run(["gcc", "-O2", "-o", str(out), str(paths.RFM_SRC / "gribgen" / "gribgen.c"),
                    "-leccodes", "-lm"], check=True)
    return out


def tool(*args, env):
    return subprocess.run(["python3", "-m", "iostack_rfm.jobs.openifs", *args],
                          capture_output=True, text=True, env=env)


@pytest.fixture
def runs(gribgen, tmp_path):
    """A GRIB run directory and an FDB holding what the FDB run would have archived."""
    grib = tmp_path / "grib"
    grib.mkdir()
    subprocess.run([str(gribgen), str(tmp_path / "all.grib"), str(len(STEPS)), str(NLEVELS)],
                   check=True, capture_output=True)
    for step in STEPS:
        for kind, levtype in (("GG", "sfc"), ("SH", "pl")):
            subprocess.run(["grib_copy", "-w", f"step={step},levtype={levtype}",
                            str(tmp_path / "all.grib"), str(grib / f"ICM{kind}test+{step:06d}")],
                           check=True)
    env = {**os.environ, "PYTHONPATH": JOB_PYTHONPATH,
           "FDB5_CONFIG_FILE": str(tmp_path / "fdb-config.yaml")}
    subprocess.run(["python3", "-m", "iostack.deployment.fdbconfig", "--root", str(tmp_path / "fdb-root"),
                    "--out", env["FDB5_CONFIG_FILE"]], check=True, env=env, capture_output=True)
    return grib, tmp_path / "fdb-root", env


def archive(paths, env):
    for p in paths:
        subprocess.run(["fdb-write", str(p)], check=True, env=env, capture_output=True)


def summary(stdout):
    line = [ln for ln in stdout.splitlines() if ln.startswith("oifs-output: files=")][-1]
    return dict(re.findall(r"(\w+)=(\S+)", line.split(" RESULT=")[0])), line


def test_identical_output_is_found_identical(runs):
    grib, fdb_root, env = runs
    assert sorted(p.name for p in openifs.output_files(grib)["GG"]) == [
        f"ICMGGtest+{s:06d}" for s in STEPS]
    archive(sorted(grib.iterdir()), env)
    p = tool("compare-fdb", str(grib), "--fdb-root", str(fdb_root), env=env)
    print(p.stdout, p.stderr)
    assert p.returncode == 0
    counts, line = summary(p.stdout)
    messages = len(STEPS) * (SH_PER_STEP + GG_PER_STEP)
    assert line.endswith("RESULT=IDENTICAL")
    assert counts == {"files": str(2 * len(STEPS)), "steps": str(len(STEPS)),
                      "messages": str(messages), "identical": str(messages),
                      "fdb_fields": str(messages), "bytes_grib": counts["bytes_grib"],
                      "bytes_fdb": counts["bytes_grib"]}
    assert int(counts["bytes_grib"]) == sum(p.stat().st_size for p in grib.iterdir())


def test_a_flipped_bit_is_one_differing_message(runs):
    grib, fdb_root, env = runs
    archive(sorted(grib.iterdir()), env)
    subprocess.run(["python3", "-m", "iostack_rfm.jobs.gribcompare", "flip-bit",
                    str(grib / "ICMSHtest+000006"), "--message", "3"], check=True, env=env)
    p = tool("compare-fdb", str(grib), "--fdb-root", str(fdb_root), env=env)
    assert p.returncode == 1
    counts, line = summary(p.stdout)
    assert int(counts["identical"]) == int(counts["messages"]) - 1
    assert "reason=ICMSHtest+000006 differs" in line
    assert "file=ICMSHtest+000006 messages=8 identical=7 RESULT=DIFFERENT" in p.stdout


def test_a_step_missing_from_fdb_is_refused(runs):
    grib, fdb_root, env = runs
    archive([p for p in sorted(grib.iterdir()) if not p.name.endswith("+000012")], env)
    p = tool("compare-fdb", str(grib), "--fdb-root", str(fdb_root), env=env)
    assert p.returncode == 1
    # fdb-read retrieves nothing for those files, and says so only by an empty file
    assert "file=ICMGGtest+000012 messages=2 identical=0 RESULT=DIFFERENT" in p.stdout
    counts, line = summary(p.stdout)
    assert int(counts["fdb_fields"]) == len(STEPS[:-1]) * (SH_PER_STEP + GG_PER_STEP)
    assert "FDB lists" in line and "FDB data files hold" in line


def test_a_field_only_fdb_holds_is_refused(runs, gribgen, tmp_path):
    grib, fdb_root, env = runs
    archive(sorted(grib.iterdir()), env)
    # one more step in FDB than the GRIB run wrote
    subprocess.run([str(gribgen), str(tmp_path / "more.grib"), str(len(STEPS) + 1), str(NLEVELS)],
                   check=True, capture_output=True)
    subprocess.run(["grib_copy", "-w", f"step={6 * len(STEPS)},levtype=sfc,param=167",
                    str(tmp_path / "more.grib"), str(tmp_path / "extra.grib")], check=True)
    archive([tmp_path / "extra.grib"], env)
    p = tool("compare-fdb", str(grib), "--fdb-root", str(fdb_root), env=env)
    assert p.returncode == 1
    counts, line = summary(p.stdout)
    assert counts["identical"] == counts["messages"]
    assert int(counts["fdb_fields"]) == int(counts["messages"]) + 1
    assert "FDB lists" in line


def test_namelist_tool_edits_in_place(tmp_path):
    fort4 = tmp_path / "fort.4"
    fort4.write_text(" &NAMCT0\n   LFDBOP=false,\n /\n &NAMPAR0\n   NPROC=4,\n /\n")
    env = {**os.environ, "PYTHONPATH": JOB_PYTHONPATH}
    p = tool("namelist", str(fort4), "--set", "NAMCT0:LFDBOP=true", "--set", "NAMPAR0:NPROC=16",
             "--set", "NAMPAR1:NWRTOUT=16", env=env)
    assert p.returncode == 0, p.stderr
    assert fort4.read_text() == (" &NAMCT0\n   LFDBOP=.true.,\n /\n &NAMPAR0\n   NPROC=16,\n /\n"
                                 " &NAMPAR1\n   NWRTOUT=16,\n /\n")
    assert "oifs-namelist: &NAMPAR1 NWRTOUT=16" in p.stdout
