"""Static checks of toolchains/: the pre-seed files are complete and agree with
each other and with the target ABIs, and the README's site table names files
that exist (the Spack recipes use these names)."""
from __future__ import annotations

import pathlib
import re

import pytest

from iostack.core.errors import IostackError
from iostack.offline import setup

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
    # one pre-seed file per Cray EX target: cray-ex's zen2 (EPYC 7742), setonix's zen3 (7763)
    assert {p.name for p in PRESEED_FILES} == {"cray-ex-zen2.cmake", "cray-ex-zen3.cmake",
                                               "aarch64-linux-gnu.cmake"}
    from iostack.site import facts as site_facts
    for site in site_facts.names():
        facts = site_facts.load(site)
        if facts.programming_environment:
            assert (PRESEED / f"cray-ex-{facts.target}.cmake").is_file(), site
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
    assert v["IOSTACK_HAVE_LDBL_MANT_DIG"] == "1"
    # Nothing that depends on the compiler: one file serves every compiler of a target.
    assert not [k for k in v if "Fortran" in k], v


@pytest.mark.parametrize("path", PRESEED_FILES, ids=lambda p: p.name)
def test_every_value_says_what_fixes_it_on_the_target(path):
    """A comment naming the C ABI, C library or kernel fact (and its document) stands
    above every group of values, and names the target's own ABI document."""
    lines = path.read_text().splitlines()
    first_set = next(i for i, line in enumerate(lines) if line.startswith("set("))
    source = None
    for line in lines[first_set - 1:]:
        if line.startswith("# "):
            source = line
        else:
            assert source and re.match(r"# (C ABI|C library|Linux)\b", source), (line, source)
    text = path.read_text()
    own, other = (("AAPCS64", "x86-64 psABI") if path.name.startswith("aarch64")
                  else ("x86-64 psABI", "AAPCS64"))
    assert own in text and other not in text


def test_long_double_answers_match_the_target_abi():
    # x86_64: 80-bit x87 extended (64-bit significand); aarch64: IEEE binary128 (113).
    assert parse(PRESEED / "cray-ex-zen2.cmake")["IOSTACK_LDBL_MANT_DIG"] == "64"
    assert parse(PRESEED / "aarch64-linux-gnu.cmake")["IOSTACK_LDBL_MANT_DIG"] == "113"


def test_readme_site_table_names_existing_files():
    text = (TOOLCHAINS / "README.md").read_text()
    table = text[text.index("## Which site uses which file"):text.index("## Usage")]
    rows = [r for r in table.splitlines() if r.startswith("| `")]
    sites = {r.split("|")[1].strip(" `") for r in rows}
    assert sites == {"cray-ex", "setonix", "oci-bm-optimized3", "local"}
    referenced = set(re.findall(r"`(toolchains/[\w./-]+\.cmake)`", table))
    assert referenced, table
    for rel in referenced:
        assert (REPO / rel).is_file(), rel
    # Every toolchain and pre-seed file is in the table.
    shipped = {f"toolchains/{p.name}" for p in TOOLCHAINS.glob("*.cmake")}
    shipped |= {f"toolchains/preseed/{p.name}" for p in PRESEED_FILES}
    assert shipped == referenced


# ---- set-up installs the aarch64 target's libraries (multiarch) ----------------------

def test_apt_list_names_the_arm64_target_libraries():
    pkgs = setup.apt_packages("bookworm", ("nightly",))
    assert {"libc6-dev:arm64", "libeccodes0:arm64", "qemu-user", "g++-aarch64-linux-gnu"} <= set(pkgs)
    assert setup.foreign_architectures(pkgs) == ["arm64"]


def test_setup_adds_the_architecture_before_apt_update(monkeypatch, capsys):
    import os
    monkeypatch.setattr(setup, "missing_apt_packages", lambda pkgs: ["cmake", "libeccodes0:arm64"])
    ran = []
    monkeypatch.setattr(setup, "run", lambda cmd, **k: ran.append([str(c) for c in cmd]))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    setup.system_packages(skip_apt=False)
    assert ran[0] == ["dpkg", "--add-architecture", "arm64"]
    assert ran[1][0] == "apt-get" and "update" in ran[1]
    assert ran[2][-2:] == ["cmake", "libeccodes0:arm64"]
    # without root, the printed line says the same, in that order
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(IostackError):
        setup.system_packages(skip_apt=False)
    assert "dpkg --add-architecture arm64 && apt-get update && apt-get install" in capsys.readouterr().err


def test_installed_check_tells_architectures_apart(monkeypatch):
    import subprocess
    # dpkg-query's own format: a package dpkg knows but never installed has no architecture
    listing = ("libc6-dev\tamd64\tinstalled\nlibc6-dev\tarm64\tinstalled\nlibeccodes0\tarm64\tinstalled\n"
               "ecbuild\tall\tinstalled\nlibeccodes-dev\tamd64\tnot-installed\n"
               "libeccodes-dev\t\tnot-installed\n")

    def fake_run(cmd, **kwargs):
        out = "amd64\n" if cmd[:2] == ["dpkg", "--print-architecture"] else listing
        return subprocess.CompletedProcess(cmd, 0, stdout=out, stderr="")

    monkeypatch.setattr(subprocess, "run", fake_run)
    wanted = ["libc6-dev", "libc6-dev:arm64", "libeccodes0", "libeccodes0:arm64", "ecbuild",
              "libeccodes-dev", "libeccodes-dev:arm64"]
    # an arm64-only package does not stand for the host's; not-installed is missing
    assert setup.missing_apt_packages(wanted) == ["libeccodes0", "libeccodes-dev", "libeccodes-dev:arm64"]


# ---- the stack build and round-trip scripts: bad input is one line and an exit code ----

def _script(name):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, TOOLCHAINS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_build_stack_reads_the_pinned_checksums_from_the_recipes():
    build_stack = _script("build_stack")
    for package in ("eckit", "metkit", "fdb"):
        sha = build_stack.pinned_sha256(package, build_stack.VERSIONS[package])
        recipe = (REPO / "packages/spack_repo/iostack/packages" / package / "package.py").read_text()
        assert f'sha256="{sha}"' in recipe


def test_build_stack_bad_input(tmp_path, monkeypatch, capsys):
    build_stack = _script("build_stack")
    assert build_stack.main(["--work", str(tmp_path), "--prefix", str(tmp_path / "p"),
                             "--packages", "eckit,hdf5"]) == 2
    assert capsys.readouterr().err.strip() == "build_stack: unknown package(s) hdf5; known: ecbuild, eckit, metkit, fdb"
    monkeypatch.setenv("IOSTACK_SOURCE_MIRROR", str(tmp_path / "nowhere"))
    assert build_stack.main(["--work", str(tmp_path / "w"), "--prefix", str(tmp_path / "p"),
                             "--packages", "eckit"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"build_stack: no Spack source mirror at {tmp_path / 'nowhere'}")
    assert not (tmp_path / "p").exists()


def test_build_stack_refuses_an_archive_whose_sha256_differs(tmp_path, monkeypatch):
    build_stack = _script("build_stack")
    sha = build_stack.pinned_sha256("eckit", build_stack.VERSIONS["eckit"])
    fake = tmp_path / "_source-cache" / "archive" / sha[:2] / f"{sha}.tar.gz"
    fake.parent.mkdir(parents=True)
    fake.write_bytes(b"not the published archive")
    monkeypatch.setenv("IOSTACK_SOURCE_MIRROR", str(tmp_path))
    with pytest.raises(build_stack.BuildError, match="the recipe pins"):
        build_stack.archive("eckit")


def test_roundtrip_bad_build_spec(tmp_path, capsys):
    roundtrip = _script("fdb_roundtrip")
    (tmp_path / "in.grib").write_bytes(b"")
    (tmp_path / "req").write_text("retrieve,class=od\n")
    rc = roundtrip.main(["--work", str(tmp_path / "w"), "--input", str(tmp_path / "in.grib"),
                         "--request", str(tmp_path / "req"), "--expect", "1", "--build", "native"])
    assert rc == 2
    assert capsys.readouterr().err.strip() == "fdb_roundtrip: --build 'native' is not NAME=PREFIX[@EMULATOR]"
