"""The outside-GRIB helper without the network: what it keeps of an sdist, how it writes a
set, what it says when the data is not there (tests/integration fetch the real sdists)."""
import io
import pathlib
import tarfile

import pytest

from iostack.regression import samples


def sdist_archive(path: pathlib.Path, sdist: samples.Sdist) -> pathlib.Path:
    members = {f"{sdist.name}/LICENSE": b"Apache License\n",
               f"{sdist.name}/{sdist.data}a.grib": b"GRIB-a",
               f"{sdist.name}/{sdist.data}b.grib": b"GRIB-b",
               f"{sdist.name}/cfgrib/__init__.py": b"code\n",
               f"{sdist.name}/tests/test_x.py": b"code\n"}
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_unpack_keeps_the_sample_data_and_the_licence_only(tmp_path):
    sdist = samples.SOURCES["cfgrib"]
    out = tmp_path / "out"
    samples._unpack(sdist_archive(tmp_path / "s.tar.gz", sdist), sdist, out)
    assert sorted(p.name for p in out.iterdir()) == ["LICENSE", "a.grib", "b.grib"]
    assert (out / "b.grib").read_bytes() == b"GRIB-b"


def test_a_set_is_its_parts_in_order(tmp_path, monkeypatch):
    monkeypatch.setitem(samples.GRIB_SETS, "two", samples.GribSet(
        "test", (samples.Part("cfgrib", "b.grib"), samples.Part("cfgrib", "a.grib")), 2))
    src = samples.source_dir("cfgrib", tmp_path)
    src.mkdir(parents=True)
    (src / "a.grib").write_bytes(b"A")
    (src / "b.grib").write_bytes(b"BB")
    assert samples.write_grib_set("two", tmp_path / "out.grib", tmp_path) == 2
    assert (tmp_path / "out.grib").read_bytes() == b"BBA"


def test_missing_sample_data_says_how_to_fetch_it(tmp_path, capsys):
    assert samples.main(["grib-set", "published-grib1", str(tmp_path / "o.grib"),
                         "--samples", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "python3 -m iostack.regression.samples fetch" in err[0]


def test_the_published_sets_cover_both_editions_ensembles_and_level_types():
    grib1, grib2 = samples.GRIB_SETS["published-grib1"], samples.GRIB_SETS["published-grib2"]
    assert all(p.edition is None for p in grib1.parts)
    assert any(p.edition == 2 for p in grib2.parts)
    assert {p.source for p in grib1.parts + grib2.parts} <= set(samples.SOURCES)
    assert (grib1.messages, grib2.messages) == (340, 167)


@pytest.mark.parametrize("name", sorted(samples.SOURCES))
def test_sources_are_pinned(name):
    sdist = samples.SOURCES[name]
    assert len(sdist.sha256) == 64 and int(sdist.sha256, 16) >= 0
    assert sdist.version.count(".") >= 2
