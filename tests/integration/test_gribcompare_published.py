"""gribcompare on published GRIB (iostack.regression.samples: cfgrib's and ecCodes' sample data from
PyPI), GRIB1 and GRIB2, changed only with ecCodes' own tools: what must be caught is caught,
reordering is not a difference."""
import io
import os
import shutil
import subprocess

import pytest

from iostack.core import paths
from support import targets
from iostack.regression import samples
from iostack_rfm.jobs import gribcompare

pytestmark = pytest.mark.skipif(not shutil.which("grib_ls"), reason="ecCodes tools not installed")
JOB_ENV = {**os.environ, "PYTHONPATH": paths.job_pythonpath()}

ERA5 = "era5-levels-members.grib"       # GRIB1, class=ea stream=enda, 10 members, 2 dates x 2 times
TIGGE = "tiggelam_cnmc_sfc.grib2"       # GRIB2, TIGGE-LAM ensemble member, surface, constant fields


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """Reference files of both editions: ERA5 members (GRIB1), the same converted to GRIB2
    by grib_set, surface fields without levelist (GRIB1), temperature on levels in hPa and Pa
    (GRIB2), a TIGGE-LAM member (GRIB2)."""
    cfgrib, eccodes = samples.fetch("cfgrib", targets.settings().samples), samples.fetch("eccodes", targets.settings().samples)
    out = tmp_path_factory.mktemp("published")
    era5_g2 = out / "era5-grib2.grib"
    ecc("grib_set", "-s", "edition=2", cfgrib / ERA5, era5_g2)
    return {"grib1": cfgrib / ERA5, "grib2": era5_g2,
            "grib1-sfc": cfgrib / "soil-surface-level-mix.grib",
            "grib2-pl": cfgrib / "hpa_and_pa.grib", "tigge": eccodes / TIGGE}


def ecc(*cmd):
    subprocess.run([str(c) for c in cmd], check=True, capture_output=True)


def compare(reference, candidate, expect=None):
    """(exit status, RESULT line, counts) of `gribcompare compare`, run in process."""
    out = io.StringIO()
    try:
        rc = 0 if gribcompare.compare(str(reference), str(candidate), expect, out=out) else 1
    except gribcompare.GribError as e:
        return 2, f"gribcompare: RESULT=ERROR {e}", {}
    lines = out.getvalue().splitlines()
    return rc, lines[-1], dict(kv.split("=") for kv in lines[-3].split()[1:])


def test_every_field_has_its_own_full_mars_key_set(published):
    era5 = gribcompare.read(str(published["grib1"]))
    assert len(era5) == 160 and {m.edition for m in era5} == {"1"}
    assert len({m.field for m in era5}) == 160      # members, dates and times tell them apart
    keys = dict(era5[0].keys)
    assert (keys["class"], keys["stream"], keys["number"], keys["param"]) == ("ea", "enda", "0", "129.128")
    sfc = gribcompare.read(str(published["grib1-sfc"]))
    assert len(sfc) == 10 and all("levelist" not in dict(m.keys) for m in sfc)
    tigge = gribcompare.read(str(published["tigge"]))
    assert len(tigge) == 7 and {m.edition for m in tigge} == {"2"}
    assert dict(tigge[0].keys)["origin"] == "cosmoleps-arpasimc-eu"
    # 8 padding bytes follow each ERA5 message: outside any message, not read as one
    assert sum(m.length for m in era5) == published["grib1"].stat().st_size - 160 * 8


@pytest.mark.parametrize("edition", ["grib1", "grib2", "grib1-sfc", "tigge"])
def test_a_copy_is_identical_and_reordering_is_no_difference(published, edition, tmp_path):
    ref = published[edition]
    shutil.copy(ref, tmp_path / "copy.grib")
    assert compare(ref, tmp_path / "copy.grib")[:2] == (0, "gribcompare: RESULT=IDENTICAL")
    ecc("grib_copy", "-B", "param:i desc,number:i desc", ref, tmp_path / "reordered.grib")
    assert gribcompare.read(str(tmp_path / "reordered.grib")) != gribcompare.read(str(ref))
    rc, result, counts = compare(ref, tmp_path / "reordered.grib")
    assert (rc, result) == (0, "gribcompare: RESULT=IDENTICAL")
    assert counts["missing"] == counts["extra"] == counts["differing"] == "0"


@pytest.mark.parametrize("edition,message", [("grib1", 0), ("grib1", 159),
                                             ("grib2", 101),
                                             ("grib1-sfc", 9), ("grib2-pl", 1)])
def test_one_flipped_bit_is_one_differing_message(published, edition, message, tmp_path):
    ref, cand = published[edition], tmp_path / "flipped.grib"
    shutil.copy(ref, cand)
    byte = gribcompare.flip_bit(str(cand), message)
    changed = [i for i, (a, b) in enumerate(zip(ref.read_bytes(), cand.read_bytes(), strict=True))
               if a != b]
    assert changed == [byte]
    # the same keys still: the flip is in the packed data, which ecCodes locates
    assert [m.keys for m in gribcompare.read(str(cand))] == [m.keys for m in gribcompare.read(str(ref))]
    rc, result, counts = compare(ref, cand)
    assert rc == 1 and "1 messages differ in bytes" in result and "grib_compare reports" in result
    assert (counts["differing"], counts["missing"], counts["extra"]) == ("1", "0", "0")


def test_a_constant_field_has_no_packed_data_to_flip(published, tmp_path):
    shutil.copy(published["tigge"], tmp_path / "tigge.grib2")
    with pytest.raises(gribcompare.GribError, match="message 3 has no packed data"):
        gribcompare.flip_bit(str(tmp_path / "tigge.grib2"), 3)
    assert (tmp_path / "tigge.grib2").read_bytes() == published["tigge"].read_bytes()


def test_a_flipped_bit_anywhere_in_a_message_is_never_identical(published, tmp_path):
    """Not only in the packed data: header bits too (a key changes, or ecCodes cannot read
    the message any more); 24 positions spread over the sections of both editions (one
    ERA5 member's 16 messages, GRIB1; the TIGGE-LAM member, GRIB2)."""
    ecc("grib_copy", "-w", "number=0", published["grib1"], tmp_path / "member0.grib")
    for ref in (tmp_path / "member0.grib", published["tigge"]):
        messages = gribcompare.read(str(ref))
        data = ref.read_bytes()
        for k in range(12):
            m = messages[(k * 7) % len(messages)]
            byte = m.offset + (k * 104729) % m.length
            cand = bytearray(data)
            cand[byte] ^= 1 << (k % 8)
            (tmp_path / "x.grib").write_bytes(cand)
            rc, result, _ = compare(ref, tmp_path / "x.grib")
            assert rc in (1, 2) and "IDENTICAL" not in result, (ref.name, byte)


def test_a_missing_message_is_caught(published, tmp_path):
    ecc("grib_copy", "-w", "count!=42", published["grib1"], tmp_path / "short.grib")
    rc, result, counts = compare(published["grib1"], tmp_path / "short.grib")
    assert rc == 1 and (counts["missing"], counts["extra"], counts["identical"]) == ("1", "0", "159")
    assert compare(published["grib1"], tmp_path / "short.grib", expect=160)[0] == 1


def test_an_extra_duplicate_is_caught(published, tmp_path):
    ecc("grib_copy", "-w", "count=17", published["grib2"], tmp_path / "one.grib")
    (tmp_path / "dup.grib").write_bytes(published["grib2"].read_bytes()
                                        + (tmp_path / "one.grib").read_bytes())
    rc, result, counts = compare(published["grib2"], tmp_path / "dup.grib")
    assert rc == 1 and (counts["extra"], counts["missing"], counts["identical"]) == ("1", "0", "160")


def test_same_keys_different_bytes_is_caught(published, tmp_path):
    """Message 17 re-encoded by grib_set with another generating process: the MARS keys
    and the values stay, the bytes do not."""
    ref = published["grib1"]
    ecc("grib_copy", "-w", "count!=18", ref, tmp_path / "rest.grib")
    ecc("grib_copy", "-w", "count=18", ref, tmp_path / "one.grib")
    ecc("grib_set", "-s", "generatingProcessIdentifier=1", tmp_path / "one.grib",
        tmp_path / "changed.grib")
    (tmp_path / "cand.grib").write_bytes((tmp_path / "rest.grib").read_bytes()
                                         + (tmp_path / "changed.grib").read_bytes())
    changed = gribcompare.read(str(tmp_path / "changed.grib"))[0]
    assert changed.keys == gribcompare.read(str(ref))[17].keys
    rc, result, counts = compare(ref, tmp_path / "cand.grib")
    assert rc == 1 and (counts["differing"], counts["missing"], counts["extra"]) == ("1", "0", "0")
    assert "grib_compare reports differences" in result


def test_an_unreadable_message_is_one_line_and_exit_2(published):
    corrupted = samples.source_dir("cfgrib", targets.settings().samples) / "era5-levels-corrupted.grib"
    p = subprocess.run(["python3", "-m", "iostack_rfm.jobs.gribcompare", "compare",
                        str(published["grib1"]), str(corrupted)], capture_output=True, text=True,
                       env=JOB_ENV)
    assert p.returncode == 2 and p.stderr == ""
    assert p.stdout.splitlines() == [
        f"gribcompare: RESULT=ERROR {corrupted}: grib_ls: ERROR: unreadable message"]


def test_requests_cover_the_fields_one_per_key_set(published):
    (era5,) = gribcompare.requests(gribcompare.read(str(published["grib1"])))
    assert "number=0/1/2/3/4/5/6/7/8/9" in era5 and "date=20170101/20170102" in era5
    assert "time=0000/1200" in era5 and "stream=enda" in era5
    # fields of different classes and streams never share a request
    mixed = gribcompare.read(str(published["grib1"])) + gribcompare.read(str(published["tigge"]))
    assert len(gribcompare.requests(mixed)) == 3


def test_gather_takes_the_grib_files_of_a_directory(published, tmp_path):
    site = tmp_path / "site"
    (site / "sub").mkdir(parents=True)
    shutil.copy(published["grib1-sfc"], site / "ICMGGsfc")
    shutil.copy(published["tigge"], site / "sub" / "member.grib2")
    (site / "notes.txt").write_text("the run's notes\n")
    assert gribcompare.gather(str(site), str(tmp_path / "all.grib")) == 17
    with pytest.raises(gribcompare.GribError, match="no GRIB messages"):
        gribcompare.gather(str(site / "notes.txt"), str(tmp_path / "none.grib"))


def test_a_sample_whose_pinned_sha256_differs_is_refused(tmp_path, monkeypatch):
    """The pin is enforced: one hex digit of the sha256 changed, pip refuses the archive
    PyPI serves and nothing is unpacked."""
    import dataclasses

    sdist = samples.SOURCES["eccodes"]
    flipped = sdist.sha256[:-1] + ("0" if sdist.sha256[-1] != "0" else "1")
    monkeypatch.setitem(samples.SOURCES, "eccodes", dataclasses.replace(sdist, sha256=flipped))
    with pytest.raises(samples.SampleError, match="pip could not fetch eccodes==2.50.0"):
        samples.fetch("eccodes", tmp_path)
    assert not (tmp_path / sdist.name).exists()
