"""OpenIFS check logic that needs no model: [OIFS-HECToR]'s cases against the references kept
for them, the namelist switches, the stripe parameter, output file names and the
forecast-days-per-day metric from logs."""
import pytest

from iostack.regression import references
from iostack_rfm.jobs import openifs

FORT4 = """\
 &NAMCT0
   NFRHIS=12,
   LFDBOP=false,
   NFRPOS=12,
 /
 &NAMPAR0
   NPROC=4, NOUTPUT=1,
 /
 &NAMDYN
   TSTEP=900.0,
 /
"""


def test_documented_speeds_are_keyed_like_the_checks_variants():
    """[OIFS-HECToR]'s Table 2 speeds (references/openifs.yaml, pseudo-system hector:compute)
    can be compared with a site's recorded baseline only if they sit under the variant keys
    the check gives its test cases: a case the check runs, its other parameters at the
    seed's settings, and the check's own performance variables."""
    section = references.load(references.REFERENCES_DIR / "openifs.yaml")["OpenIFSOutputCheck"]
    documented = section["references"]["hector:compute"]
    assert documented
    for variant, entries in documented.items():
        params = dict(kv.split("=") for kv in variant.split(","))
        assert params["case"] in openifs.CASES
        assert variant == references.variant_key(
            {"case": params["case"], "hugepages": "none", "nwrtout": "1", "stripe": "inherit"})
        assert set(entries) <= set(section["thresholds"])
        for e in entries.values():
            # the layout the seed ran is the case's
            case = openifs.CASES[params["case"]]
            assert e["provenance"]["cores"] == case.cores
            assert e["provenance"]["layout"] == f"{case.mpi_tasks}x{case.threads} MPIxOMP"


def test_namelist_replaces_adds_and_appends():
    text = openifs.set_namelist(FORT4, "NAMCT0", "LFDBOP", True)
    assert "   LFDBOP=.true.," in text and "LFDBOP=false" not in text
    assert "NFRHIS=12," in text and "NFRPOS=12," in text
    # a key the group lacks goes before its end; other groups are untouched
    text = openifs.set_namelist(text, "namdyn", "LSLAG", "true")
    dyn = text[text.index("&NAMDYN"):]
    assert dyn.index("LSLAG=.true.,") < dyn.index(" /")
    # a missing group is appended
    text = openifs.set_namelist(text, "NAMPAR1", "NWRTOUT", 16)
    assert text.rstrip().endswith("&NAMPAR1\n   NWRTOUT=16,\n /")
    # an assignment sharing its line: the first key of the line is replaced in place
    text = openifs.set_namelist(text, "NAMPAR0", "NPROC", 128)
    assert "   NPROC=128, NOUTPUT=1," in text


def test_namelist_group_without_end_is_refused():
    with pytest.raises(ValueError, match="no end"):
        openifs.set_namelist(" &NAMCT0\n  LFDBOP=false,\n", "NAMCT0", "LFDBOP", True)


@pytest.mark.parametrize("value,text", [(True, ".true."), ("F", ".false."), (4, "4"),
                                        ("1.5", "1.5"), ("fwj8", "'fwj8'")])
def test_fortran_values(value, text):
    assert openifs.fortran_value(value) == text


def test_stripe_parameter():
    assert openifs.stripe_options("inherit") is None
    # [OIFS-HECToR]: `lfs setstripe -c 8 -s 16M` (today's lfs spells the size -S)
    assert openifs.stripe_options("8x16M") == ["-c", "8", "-S", "16M"]
    assert openifs.stripe_options("-1x4M") == ["-c", "-1", "-S", "4M"]
    with pytest.raises(ValueError):
        openifs.stripe_options("8")


def test_output_file_names(tmp_path):
    for name in ("ICMGGfwj8+000024", "ICMSHfwj8+000024", "ICMGGfwj8+000036",
                 "ICMSHfwj8+000036", "ICMUAfwj8+000036", "ICMGGfwj8INIT", "ifs.stat",
                 "ICMSHfwj8+36"):
        (tmp_path / name).write_bytes(b"")
    files = openifs.output_files(tmp_path)
    assert [p.name for p in files["GG"]] == ["ICMGGfwj8+000024", "ICMGGfwj8+000036"]
    assert [p.name for p in files["SH"]] == ["ICMSHfwj8+000024", "ICMSHfwj8+000036"]
    # Full-POS's upper-air grid-point fields (NFPOS=2)
    assert [p.name for p in files["UA"]] == ["ICMUAfwj8+000036"]
    assert openifs.experiments_of(tmp_path) == {"fwj8"}


def test_forecast_days_per_day_from_the_logs():
    # a 10-day T159 forecast in 4 min 16 s of model wall time: 3375 days per day, the
    # order of Table 2's 3372
    stat = ("  10:00:01 AAAA00AAA STEPO                   0    0.100    0.100    0.150      0:00      0:00\n"
            "  10:04:17 AAAA00AAA STEPO                 240    0.900    0.900    1.050      4:10      4:16\n")
    node = "  10:04:17 STEP  240 H= 240:00 +CPU=  1.050\n"
    run = openifs.summarize(stat, node)
    assert run.forecast_days == 10 and run.wall_seconds == 256
    assert run.forecast_days_per_day == pytest.approx(3375.0)
