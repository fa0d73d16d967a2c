"""Static checks of toolchains/: the pre-seed files are complete and agree with
each other and with the target ABIs, and the README's site table names files
that exist (the Spack recipes use these names)."""
from __future__ import annotations

import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
TOOLCHAINS = REPO / "toolchains"
PRESEED = TOOLCHAINS / "preseed"
PRESEED_FILES = sorted(PRESEED.glob("*.cmake"))

_SET = re.compile(r'^set\((\w+) "([^"]*)" CACHE INTERNAL "[^"]*"\)$')


def parse(path: pathlib.Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SET.match(line)
        assert m, f"{path.name}: not a pre-seed line: {line!r}"
        assert m[1] not in out, f"{path.name}: {m[1]} set twice"
        out[m[1]] = m[2]
    return out


def test_expected_files_exist():
    names = {p.name for p in TOOLCHAINS.glob("*.cmake")}
    assert {"cray-cce.cmake", "cray-gnu.cmake", "aarch64-linux-gnu.cmake"} <= names
    assert {p.name for p in PRESEED_FILES} >= {"cray-ex-zen2.cmake", "cray-ex-zen3.cmake",
                                               "aarch64-linux-gnu.cmake"}
    assert (PRESEED / "regenerate.sh").stat().st_mode & 0o111


def test_preseed_files_cover_the_same_variables():
    sets = {p.name: list(parse(p)) for p in PRESEED_FILES}
    first = next(iter(sets.values()))
    for name, variables in sets.items():
        assert variables == first, name


@pytest.mark.parametrize("path", PRESEED_FILES, ids=lambda p: p.name)
def test_preseed_values_are_consistent(path):
    v = parse(path)
    # Every check_type_size result comes with the HAVE_ entry it is skipped on.
    sized = [k for k in v if re.match(r"(EC_|ECCODES_|ECKIT_|CMAKE_)?SIZEOF_", k) and k != "EC_SIZEOF_PTR"]
    assert len(sized) >= 17
    for k in sized:
        assert v.get(f"HAVE_{k}") == "TRUE", k
        assert v[k].isdigit() and int(v[k]) > 0, (k, v[k])
    # Both supported targets are LP64 little-endian IEEE machines.
    assert v["CMAKE_SIZEOF_VOID_P"] == v["EC_SIZEOF_PTR"] == "8"
    assert v["EC_SIZEOF_LONG"] == v["ECCODES_SIZEOF_LONG"] == "8"
    assert v["EC_SIZEOF_INT"] == v["ECCODES_SIZEOF_INT"] == "4"
    assert v["EC_SIZEOF_OFF_T"] == v["SIZEOF_OFF_T"] == "8"
    assert (v["EC_LITTLE_ENDIAN"], v["EC_BIG_ENDIAN"]) == ("1", "0")
    assert (v["IEEE_LE"], v["IEEE_BE"]) == ("1", "0")
    # ecbuild_check_*_source_return results: flag plus output.
    assert v["IOSTACK_HAVE_LDBL_MANT_DIG"] == v["IOSTACK_HAVE_Fortran_LDBL_PRECISION"] == "1"
    assert all(v[f"HAS_Fortran_{f}"] in ("TRUE", "FALSE") for f in
               ("C_SIZE_T", "C_SIZEOF", "DERIVEDTYPE_INTERFACE", "DERIVEDTYPE_IO", "FINALIZATION", "SUBMODULES"))


def test_long_double_answers_match_the_target_abi():
    # x86_64: 80-bit x87 extended (64-bit mantissa, 18 digits);
    # aarch64: IEEE binary128 (113-bit mantissa, 33 digits).
    for name in ("cray-ex-zen2.cmake", "cray-ex-zen3.cmake"):
        v = parse(PRESEED / name)
        assert (v["IOSTACK_LDBL_MANT_DIG"], v["IOSTACK_Fortran_LDBL_PRECISION"]) == ("64", "18")
    v = parse(PRESEED / "aarch64-linux-gnu.cmake")
    assert (v["IOSTACK_LDBL_MANT_DIG"], v["IOSTACK_Fortran_LDBL_PRECISION"]) == ("113", "33")


def test_zen2_and_zen3_agree():
    assert parse(PRESEED / "cray-ex-zen2.cmake") == parse(PRESEED / "cray-ex-zen3.cmake")


def test_readme_site_table_names_existing_files():
    text = (TOOLCHAINS / "README.md").read_text()
    table = text[text.index("## Which site uses which file"):text.index("## Usage")]
    rows = [r for r in table.splitlines() if r.startswith("| `")]
    sites = {r.split("|")[1].strip(" `") for r in rows}
    assert sites == {"cray-ex", "oci-bm-optimized3", "local"}
    referenced = set(re.findall(r"`(toolchains/[\w./-]+\.cmake)`", table))
    assert referenced, table
    for rel in referenced:
        assert (REPO / rel).is_file(), rel
    # Every toolchain and pre-seed file is in the table.
    shipped = {f"toolchains/{p.name}" for p in TOOLCHAINS.glob("*.cmake")}
    shipped |= {f"toolchains/preseed/{p.name}" for p in PRESEED_FILES}
    assert shipped == referenced
