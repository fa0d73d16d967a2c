"""The job-side half of the MultIO checks (iostack_rfm.jobs.multio) on real GRIB and a real FDB:
a file cut into one file per message, byte for byte (one left out for the missing-field
control), multio-hammer's configuration as its source reads it, and what an FDB root
holds counted from its data files."""
import os
import shutil
import subprocess

import pytest
import yaml

from iostack.core import paths
from iostack_rfm.jobs import gribcompare, multio

pytestmark = pytest.mark.skipif(not all(shutil.which(p) for p in ("grib_copy", "grib_ls",
                                                                   "codes_info", "fdb-write")),
                                reason="needs ecCodes' and FDB's tools")


@pytest.fixture
def grib(tmp_path):
    """Four messages of two editions from ecCodes' own samples."""
    samples = subprocess.run(["codes_info", "-s"], capture_output=True, text=True).stdout.strip()
    out = tmp_path / "input.grib"
    with open(out, "wb") as f:
        for name in ("gg_sfc_grib1", "gg_sfc_grib2", "regular_ll_pl_grib2", "reduced_gg_ml_grib2"):
            with open(os.path.join(samples, f"{name}.tmpl"), "rb") as s:
                f.write(s.read())
    return out


def test_split_writes_each_message_alone_byte_for_byte(grib, tmp_path):
    messages = gribcompare.read(str(grib))
    assert multio.split(str(grib), str(tmp_path / "fields")) == (4, 4)
    files = sorted((tmp_path / "fields").iterdir())
    assert [f.name for f in files] == [f"{i:06d}.grib" for i in range(4)]
    for f, body in zip(files, gribcompare.message_bytes(str(grib), messages), strict=True):
        assert f.read_bytes() == body
        assert len(gribcompare.read(str(f))) == 1


def test_split_leaves_one_message_out_for_the_control(grib, tmp_path):
    assert multio.split(str(grib), str(tmp_path / "fields"), skip=2) == (4, 3)
    assert sorted(f.name for f in (tmp_path / "fields").iterdir()) == \
        ["000000.grib", "000001.grib", "000003.grib"]
    with pytest.raises(gribcompare.GribError, match="no message 4"):
        multio.split(str(grib), str(tmp_path / "other"), skip=4)


def test_hammer_config_is_what_multio_hammer_reads():
    config = yaml.safe_load(multio.hammer_config(7))
    # multio-hammer 1.5.1: transport `none` runs the plans in its process; it asks the
    # parameters of each level type; the plan's Sink action archives into FDB
    assert config["transport"] == "none"
    assert config["parameters"] == {"ml": [], "pl": [], "sfc": list(multio.HAMMER_PARAMS[:7])}
    (plan,) = config["plans"]
    assert plan["actions"] == [{"type": "Sink", "sinks": [{"type": "fdb5", "config": {}}]}]
    with pytest.raises(ValueError):
        multio.hammer_config(len(multio.HAMMER_PARAMS) + 1)
    assert yaml.safe_load(multio.SINKS_YAML) == {"sinks": [{"type": "fdb5", "config": {}}]}


def test_archived_counts_what_fdb_holds(tmp_path):
    samples = subprocess.run(["codes_info", "-s"], capture_output=True, text=True).stdout.strip()
    fields = tmp_path / "fields.grib"
    for step in (0, 6, 12):
        subprocess.run(["grib_set", "-s", f"class=rd,expver=xxxx,stream=oper,type=fc,step={step}",
                        os.path.join(samples, "gg_sfc_grib2.tmpl"), str(tmp_path / "one.grib")],
                       check=True)
        with open(fields, "ab") as f:
            f.write((tmp_path / "one.grib").read_bytes())
    subprocess.run(["python3", "-m", "iostack.deployment.fdbconfig", "--root", str(tmp_path / "root"),
                    "--out", str(tmp_path / "fdb.yaml")], check=True,
                   env={**os.environ, "PYTHONPATH": str(paths.LIB)})
    subprocess.run(["fdb-write", str(fields)], check=True, capture_output=True,
                   env={**os.environ, "FDB5_CONFIG_FILE": str(tmp_path / "fdb.yaml")})
    assert multio.archived(str(tmp_path / "root")) == (3, fields.stat().st_size)
