"""iostack_rfm.jobs.openfoam's case summary: what an OpenFOAM run wrote, and one digest over it, on case
directories laid out as OpenFOAM writes them (fields in ASCII)."""
from iostack_rfm.jobs import openfoam as foamcase


def field(cells, first=1.5):
    values = "\n".join(f"{first + i}" for i in range(cells))
    return (f"FoamFile\n{{\n    class volScalarField;\n    object p;\n}}\n"
            f"dimensions [0 2 -2 0 0 0 0];\n\ninternalField   nonuniform List<scalar> \n"
            f"{cells}\n(\n{values}\n)\n;\n")


def make_case(root, times=("282",), cells=4, processors=0, first=1.5):
    root.mkdir(parents=True)
    (root / "0").mkdir()
    (root / "0" / "p").write_text("internalField   uniform 0;\n")
    (root / "system").mkdir()
    parts = [root / f"processor{i}" for i in range(processors)] or [root]
    for part in parts:
        for t in times:
            d = part / t
            d.mkdir(parents=True)
            (d / "p").write_text(field(cells // len(parts), first))
            (d / "uniform").mkdir()
            (d / "uniform" / "time").write_text(f"value {t};\n")
    return root


def test_serial_case(tmp_path):
    s = foamcase.summarize(make_case(tmp_path / "serial", cells=12), "serial")
    assert s["label"] == "serial" and s["processors"] == 0
    assert (s["times"], s["written"], s["files"], s["cells"]) == ("282", "1", 2, 12)


def test_identical_runs_have_one_digest_and_one_changed_value_another(tmp_path):
    a = foamcase.summarize(make_case(tmp_path / "a"))
    b = foamcase.summarize(make_case(tmp_path / "b"))
    c = foamcase.summarize(make_case(tmp_path / "c", first=1.25))
    assert a["sha256"] == b["sha256"] != c["sha256"]


def test_decomposed_case_adds_up_processors(tmp_path):
    case = make_case(tmp_path / "p", times=("100", "200"), cells=12, processors=2)
    s = foamcase.summarize(case)
    assert (s["processors"], s["times"], s["written"], s["files"], s["cells"]) == (
        2, "200", "2", 8, 12)
    # processors that wrote different times show both
    (case / "processor1" / "300").mkdir()
    s = foamcase.summarize(case)
    assert s["times"] == "200,300" and s["written"] == "2,3"


def test_top_level_of_a_reconstructed_case(tmp_path):
    case = make_case(tmp_path / "r", cells=12, processors=2)
    (case / "285").mkdir()
    (case / "285" / "p").write_text(field(12))
    s = foamcase.summarize(case, "reconstructed", top=True)
    assert (s["processors"], s["times"], s["cells"]) == (0, "285", 12)


def test_nothing_written(tmp_path):
    s = foamcase.summarize(make_case(tmp_path / "n", times=()))
    assert (s["times"], s["written"], s["files"], s["cells"], s["sha256"]) == (
        "none", "0", 0, "unknown", "none")


def test_line_round_trip(tmp_path):
    s = foamcase.summarize(make_case(tmp_path / "l"), "x")
    line = foamcase.format_line(s)
    assert line.startswith("foamcase: label=x ")
    assert foamcase.parse_line(line) == {k: str(v) for k, v in s.items()}
