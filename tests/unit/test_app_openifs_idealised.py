"""OpenIFS idealised forecasts (issue 32) without the model: the project's namelists read as
the model reads them (the repository's own parser; f90nml is not in the venv), each asks
for an analytic start and hourly output, the output modes switch only what they say, and
the job's figures (medians, spreads, FDB's share, identities) are computed as documented."""
import gzip
import pathlib
import re

import pytest

from iostack_rfm.jobs import openifs_idealised as idealised

TL159 = [c for c in idealised.CASES.values() if c.truncation == 159]


@pytest.fixture(params=sorted(idealised.CASES))
def case(request):
    return idealised.CASES[request.param]


def groups(case):
    return idealised.namelist_groups(case.namelist.read_text())


def test_the_namelists_are_the_cases():
    assert {p.stem for p in idealised.NAMELISTS.glob("*.nml")} == set(idealised.CASES)
    assert len(TL159) == 2


def test_every_group_has_its_comment_and_posnam_finds_it(case):
    """POSNAM (posname.F90) finds a group by `&NAME` upper case in a line's first 10
    characters: a comment must never look like one, and each group says why it is there."""
    lines = case.namelist.read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("&")]
    assert len(starts) == len(groups(case)) >= 10
    for i in starts:
        assert re.fullmatch(r"&[A-Z0-9_]+", lines[i]), lines[i]
        assert lines[i - 1].startswith("! "), f"{lines[i]} has no comment"
    for line in lines:
        if line.startswith("!"):
            assert "&" not in line[:10], line


def test_an_analytic_start_with_the_geometry_of_the_namelist(case):
    g = groups(case)
    assert g["NAMARG"]["NCONF"] == 1 and g["NAMARG"]["NSUPERSEDE"] == 0
    assert g["NAMCT0"]["N3DINI"] == 2
    assert re.fullmatch(r"[a-z0-9]{4}", g["NAMARG"]["CNMEXP"])
    dim = g["NAMDIM"]
    assert dim["NSMAX"] == case.truncation
    assert dim["NFLEVG"] == dim["NIOLEVG"] == case.levels
    # the levels sudefo_vv1.F90 has built in: no A/B in the namelist
    assert case.levels in (19, 31) and g["NAMVV1"] == {}
    # a full Gaussian grid of NDGLG latitudes, twice as many longitudes; linear (TL) or
    # quadratic grid for the truncation
    assert g["NAMGEM"]["NHTYP"] == 0
    assert dim["NDLON"] == 2 * dim["NDGLG"]
    factor = 2 if case.truncation == 159 else 3
    assert dim["NDLON"] == factor * case.truncation + (2 if factor == 2 else 1)
    # no physics, no radiation tables, no climate file
    assert g["NAEPHY"]["LEPHYS"] is False and g["NAEPHY"]["LERADI"] is False
    assert g["NAMMCC"]["LMCCEC"] is False


def test_the_test_case_of_each_namelist(case):
    core = groups(case)["NAMDYNCORE"]
    if case.name.startswith("hs_"):
        assert (core["CTEST_FAMILY"], core["NTESTCASE"]) == ("MISC", 71)
        assert core["LHELDSUAREZ"] is True and core["NOISEVOR"] == 1
    else:
        assert (core["CTEST_FAMILY"], core["NTESTCASE"]) == ("DCMIP16", 161)
        assert "LHELDSUAREZ" not in core


def test_hourly_output_of_model_and_pressure_levels_for_a_day(case):
    g = groups(case)
    assert idealised.output_hours(g) == (1.0, 1.0)
    assert idealised.forecast_hours(g) == 24.0
    fpc = g["NAMFPC"]
    assert fpc["CFPFMT"] == "MODEL" and fpc["NFPPHY"] == 0
    assert fpc["NFP3DFP"] == len(fpc["MFP3DFP"]) and fpc["NFP2DF"] == 1
    assert max(fpc["RFP3P"]) == 100000.0 and len(fpc["RFP3P"]) == 13
    assert g["NAMCT0"]["NFRSDI"] == 1 and g["NAMCT0"]["LFDBOP"] is False


def test_the_experiments_have_their_own_names():
    names = [groups(c)["NAMARG"]["CNMEXP"] for c in idealised.CASES.values()]
    assert len(set(names)) == len(names)


EMPTY = "&NAMCT0\n/\n&NAMCT1\n/\n&NAMDIM\n/\n&NAMFPG\n/\n"


@pytest.mark.parametrize("mode,lfdbop,events", [("none", False, 0), ("grib", False, 1),
                                                ("fdb", True, 1)])
def test_fort4_sets_the_mode_and_appends_the_empty_groups(mode, lfdbop, events):
    text = idealised.fort4("hs_tl159l31", mode, 4, EMPTY, [("NAMDIM", "NPROMA", "-32")])
    parsed = idealised.parse_namelist(text)
    first = {}
    for group, values in parsed:
        first.setdefault(group, values)
    assert first["NAMCT0"]["LFDBOP"] is lfdbop
    assert first["NAMCT1"] == {"N1HIS": events, "N1POS": events}
    assert first["NAMPAR0"]["NPROC"] == 4 and first["NAMDIM"]["NPROMA"] == -32
    # the case's groups come first, the empty ones after: the model reads the first
    names = [g for g, _ in parsed]
    assert names[-4:] == ["NAMCT0", "NAMCT1", "NAMDIM", "NAMFPG"]
    assert names.index("NAMCT0") < len(names) - 4
    # nothing else changed
    base = groups(idealised.CASES["hs_tl159l31"])
    assert {g: v for g, v in first.items() if g not in ("NAMCT0", "NAMCT1", "NAMPAR0", "NAMDIM",
                                                        "NAMFPG")} == \
        {g: v for g, v in base.items() if g not in ("NAMCT0", "NAMCT1", "NAMPAR0", "NAMDIM")}


def test_the_parser_refuses_what_the_model_would_misread():
    with pytest.raises(ValueError, match="twice"):
        idealised.namelist_groups("&NAMCT0\n  N3DINI=2,\n/\n&NAMCT0\n/\n")
    with pytest.raises(ValueError, match="sets N3DINI twice"):
        idealised.parse_namelist("&NAMCT0\n  N3DINI=2,\n  N3DINI=0,\n/\n")
    with pytest.raises(ValueError, match="outside any group"):
        idealised.parse_namelist("N3DINI=2\n&NAMCT0\n/\n")
    assert idealised.parse_namelist("&NAMX\n  A='x!y', ! comment\n  B=1.5D2,3,\n/\n") == \
        [("NAMX", {"A": "x!y", "B": [150.0, 3]})]


NODE_STEPS = """\
 SPECTRAL NORMS -      LOG(PREHYDS)   0.115129254649702E+02
 14:00:01 STEP    1 H=   0:30 +CPU=  1.234
 SPECTRAL NORMS -      LOG(PREHYDS)   0.115129254649702E+02
 14:00:02 STEP    2 H=   1:00 +CPU=  1.201
 SPECTRAL NORMS -      LOG(PREHYDS)   0.115129254649703E+02
  *** END CNT0 ***
"""


def test_a_run_is_read_from_its_log_and_its_line_read_back():
    run = idealised.read_run(NODE_STEPS, "fdb", 2, 7.2)
    assert (run.forecast_hours, run.steps, run.norms, run.ended) == (1.0, 2, 3, True)
    # one forecast hour in 7.2 s: 1/24 day * 86400 / 7.2 s
    assert run.days_per_day == pytest.approx(500.0)
    assert idealised.read_runs(run.line() + "\n") == [run]
    assert not idealised.read_run(NODE_STEPS.replace("END CNT0", "ABORT"), "fdb", 2, 7.2).ended
    with pytest.raises(ValueError, match="no model step"):
        idealised.read_run("nothing\n", "none", 1, 1.0)


def test_figures_are_medians_spreads_and_the_shares_of_output():
    walls = {"none": [10.0, 10.2, 9.9], "grib": [10.4, 10.6, 10.5], "fdb": [11.0, 10.8, 10.9]}
    runs = [idealised.Run(m, i + 1, w, 24.0, 48, 49, True)
            for m, ws in walls.items() for i, w in enumerate(ws)]
    lines = idealised.figures(runs)
    assert lines[0] == ("mode=none runs=3 wall_median=10.000 wall_spread=0.030 "
                        "days_per_day=8640.0 days_per_day_spread=0.030")
    assert lines[2].startswith("mode=fdb runs=3 wall_median=10.900 wall_spread=0.018 ")
    # the time beyond the no-output runs', over the output runs'
    assert lines[3] == f"share grib={0.5 / 10.5:.4f} fdb={0.9 / 10.9:.4f}"
    assert idealised.figures(runs[3:6]) == [lines[1]]


def write_run(d: pathlib.Path, norms: str, files: dict[str, bytes]):
    d.mkdir(parents=True)
    (d / "NORMS").write_text(norms)
    for name, content in files.items():
        (d / name).write_bytes(content)
    return d


def test_norms_and_output_identity(tmp_path):
    norms = " SPECTRAL NORMS - 1\n AVE 0.1\n SPECTRAL NORMS - 2\n AVE 0.2\n"
    files = {"ICMSHh159+000001": b"GRIB1", "ICMUAh159+000001": b"GRIB2", "fort.4": b"x"}
    a = write_run(tmp_path / "grib-1", norms, files)
    b = write_run(tmp_path / "grib-2", norms, files)
    assert idealised.same_norms([a, b]) == (True, "")
    assert idealised.same_output([a, b]) == (True, 2, "")
    c = write_run(tmp_path / "grib-3", norms.replace("0.2", "0.3"),
                  {**files, "ICMUAh159+000001": b"GRIB3"})
    same, why = idealised.same_norms([a, c])
    # the first block that differs is named: where a change first shows
    assert not same and why.endswith("norms block 2: 'AVE 0.2' != 'AVE 0.3'")
    assert idealised.same_output([a, c]) == (False, 2, f"{c / 'ICMUAh159+000001'} differs "
                                                       f"from {a / 'ICMUAh159+000001'}")
    empty = write_run(tmp_path / "none-1", "", {})
    assert idealised.same_norms([a, empty])[0] is False


# A real run's logs (tests/data/openifs-idealised): OpenIFS 48r1.1.0 of local/nwp, hs_t21l19,
# GRIB files, 1 rank x 1 thread (NODE.001_01 gzipped, and ifs-grep-norms.pl's NORMS of it)
REAL = pathlib.Path(__file__).resolve().parents[1] / "data" / "openifs-idealised"


def test_a_real_runs_log_gives_its_steps_and_the_loops_norms():
    node = gzip.decompress((REAL / "hs_t21l19.NODE.001_01.gz").read_bytes()).decode()
    run = idealised.read_run(node, "grib", 1, 2.5)
    assert (run.forecast_hours, run.steps, run.norms, run.ended) == (24.0, 24, 25, True)
    # the set-up prints two blocks of its own before CNT4: not the time loop's steps 0..24
    assert node.count(" SPECTRAL NORMS ") == 27


@pytest.mark.parametrize("where, change, expected", [
    (2, lambda v: v[:-6] + "9" + v[-5:], "norms block 8 (step 5), field TEMPERATURE (row AVE)"),
    (0, lambda v: v.replace("0.1151", "0.1152"), "norms block 8 (step 5), field LOG(PREHYDS)"),
])
def test_a_change_in_a_real_runs_norms_names_the_step_and_the_field(tmp_path, where, change,
                                                                     expected):
    text = (REAL / "hs_t21l19.NORMS").read_text()
    lines = text.splitlines(keepends=True)
    block8 = [i for i, line in enumerate(lines) if line.startswith(" SPECTRAL NORMS")][7]
    line = lines[block8 + where]
    if where == 2:   # a column of the table: the temperature's norm
        words = line.split()
        words[3] = change(words[3])
        changed = " " + " ".join(words) + "\n"
    else:
        changed = change(line)
    assert changed != line
    a = write_run(tmp_path / "a", text, {})
    b = write_run(tmp_path / "b", "".join(lines[:block8 + where] + [changed]
                                          + lines[block8 + where + 1:]), {})
    assert idealised.same_norms([a, a]) == (True, "")
    same, why = idealised.same_norms([a, b])
    assert not same and why.startswith(f"{b} differ from {a}: {expected}: "), why


def test_output_changes_no_norm_of_the_model(tmp_path):
    """A run with output has FULL-POS SPNORMS lines for its post-processing events, one with
    none has not: the model's norms are the rest, and they must be the same."""
    text = (REAL / "hs_t21l19.NORMS").read_text()
    assert text.count("FULL-POS SPNORMS\n") == 50    # 2 a step, steps 0..24
    no_output = write_run(tmp_path / "none", text.replace("FULL-POS SPNORMS\n", ""), {})
    grib = write_run(tmp_path / "grib", text, {})
    assert idealised.same_norms([no_output, grib]) == (True, "")


def test_by_mode_reruns_must_agree_and_modes_are_only_compared(tmp_path, capsys):
    """`figures --by-mode`: each mode's reruns must print the same norms (else exit 1); a
    difference between modes is said, naming where, and does not fail."""
    text = (REAL / "hs_t21l19.NORMS").read_text()
    other = text.replace("0.218514877319336E+03", "0.218514877319339E+03", 1)
    runs = tmp_path / "runs.txt"
    runs.write_text("")
    dirs = [write_run(tmp_path / "none-1", other, {}), write_run(tmp_path / "none-2", other, {}),
            write_run(tmp_path / "grib-1", text, {}), write_run(tmp_path / "grib-2", text, {})]
    rc = idealised.main(["figures", str(runs), "--by-mode", "--norms-of", *map(str, dirs)])
    out = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert out[:2] == ["oifs-idealised: norms mode=none runs=2 RESULT=IDENTICAL",
                       "oifs-idealised: norms mode=grib runs=2 RESULT=IDENTICAL"]
    assert out[2].startswith("oifs-idealised: norms across-modes none grib RESULT=DIFFERENT ")
    assert "norms block 8 (step 5), field TEMPERATURE (row AVE)" in out[2]
    write_run(tmp_path / "grib-3", other, {})
    rc = idealised.main(["figures", str(runs), "--by-mode", "--norms-of",
                         *map(str, dirs), str(tmp_path / "grib-3")])
    out = capsys.readouterr().out.splitlines()
    assert rc == 1 and out[1].startswith("oifs-idealised: norms mode=grib runs=3 RESULT=DIFFERENT")


def real_norms(name: str) -> str:
    return gzip.decompress((REAL / f"{name}.NORMS.gz").read_bytes()).decode()


def test_with_openblas_output_changes_the_models_norms_with_a_reference_blas_not(tmp_path):
    """Real runs (hs_t21l19, 1x1, a day): with the stack's OpenBLAS the run with GRIB output
    prints other norms than the one with none from step 1 (a post-processing step widens
    the Legendre transforms' SGEMMs, and OpenBLAS rounds a field by the width); with
    netlib's reference BLAS preloaded (Debian's libblas3), every norm is the same."""
    grib = write_run(tmp_path / "grib", (REAL / "hs_t21l19.NORMS").read_text(), {})
    none = write_run(tmp_path / "none", real_norms("hs_t21l19.none"), {})
    same, why = idealised.same_norms([none, grib])
    assert not same and "norms block 4 (step 1), field VORTICITY (row AVE)" in why, why
    ref_grib = write_run(tmp_path / "ref-grib", real_norms("hs_t21l19.reference-blas.grib"), {})
    ref_none = write_run(tmp_path / "ref-none", real_norms("hs_t21l19.reference-blas.none"), {})
    assert idealised.same_norms([ref_none, ref_grib]) == (True, "")
    # another BLAS is another rounding: the two BLASes' no-output runs differ too
    assert not idealised.same_norms([none, ref_none])[0]


def test_same_across_modes_makes_a_difference_between_modes_fail(tmp_path, capsys):
    runs = tmp_path / "runs.txt"
    runs.write_text("")
    ref = [write_run(tmp_path / "none-1", real_norms("hs_t21l19.reference-blas.none"), {}),
           write_run(tmp_path / "grib-1", real_norms("hs_t21l19.reference-blas.grib"), {})]
    args = ["figures", str(runs), "--by-mode", "--same-across-modes", "--norms-of"]
    assert idealised.main([*args, *map(str, ref)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == \
        "oifs-idealised: norms across-modes none grib RESULT=IDENTICAL"
    openblas = [write_run(tmp_path / "x" / "none-1", real_norms("hs_t21l19.none"), {}),
                write_run(tmp_path / "x" / "grib-1", (REAL / "hs_t21l19.NORMS").read_text(), {})]
    assert idealised.main([*args, *map(str, openblas)]) == 1
    assert "across-modes none grib RESULT=DIFFERENT" in capsys.readouterr().out
    # without the switch the same difference is said and passes
    assert idealised.main([*args[:3], "--norms-of", *map(str, openblas)]) == 0


@pytest.mark.parametrize("case, tasks, threads, mode, ref, key", [
    ("dcmip161_tl159l31", 2, 1, "fdb", False, "idealised-dcmip161_tl159l31-2x1-fdb"),
    # one key for every layout and mode: they must agree
    ("dcmip161_tl159l31", 2, 1, "fdb", True, "idealised-dcmip161_tl159l31-reference-blas"),
    ("dcmip161_tl159l31", 1, 2, "none", True, "idealised-dcmip161_tl159l31-reference-blas"),
    # Held-Suarez draws its initial noise per task: the task count stays in the key
    ("hs_t21l19", 2, 1, "grib", True, "idealised-hs_t21l19-tasks2-reference-blas"),
    ("hs_t21l19", 1, 2, "none", True, "idealised-hs_t21l19-tasks1-reference-blas"),
])
def test_the_norms_key_holds_together_what_must_agree(case, tasks, threads, mode, ref, key):
    assert idealised.norms_key(case, tasks, threads, mode, ref) == key
