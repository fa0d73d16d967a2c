"""The idealised namelists (reframe-tests/src/openifs_idealised) against OpenIFS 48r1.1.0's
own source, from the registered source mirror: every variable they set is declared in the
NAMELIST statement of its group, and what their comments rely on is in the code (the
analytic start, the test cases, the built-in levels, the switches that avoid the files the
model would otherwise open). The composed fort.4 carries every group of ifs-test's list.
No model runs."""
import re
import tarfile

import pytest

from iostack_rfm.jobs import openifs_idealised as idealised

from test_openifs_ifstest import mirror_tarball

_NAMELIST = re.compile(r"\bNAMELIST\s*/\s*(\w+)\s*/(.*)", re.I | re.S)


def declarations(text: str) -> dict[str, set[str]]:
    """{GROUP: variables} of the NAMELIST statements in Fortran source (continuations joined,
    comments dropped)."""
    found: dict[str, set[str]] = {}
    statement = ""
    for line in text.splitlines():
        line = line.split("!", 1)[0].rstrip()
        stripped = line.strip()
        if statement:
            statement += " " + stripped.lstrip("&")
        elif re.match(r"\s*NAMELIST\s*/", line, re.I):
            statement = stripped
        else:
            continue
        if statement.endswith("&"):
            statement = statement[:-1]
            continue
        m = _NAMELIST.match(statement)
        if m:
            names = {v.strip().upper() for v in m.group(2).replace("&", " ").split(",")}
            found.setdefault(m.group(1).upper(), set()).update(n for n in names if n)
        statement = ""
    return found


@pytest.fixture(scope="module")
def source():
    """The 48r1.1.0 files the tests read: {path under openifs/: text}."""
    tarball = mirror_tarball()
    if tarball is None:
        pytest.skip("OpenIFS 48r1.1.0 is not in the registered source mirror (bin/iostack "
                    "setup --spack-bundle)")
    texts = {}
    with tarfile.open(tarball) as tar:
        for m in tar.getmembers():
            name = m.name.removeprefix("openifs/")
            if m.isfile() and (name.endswith(".nam.h") or name.endswith(".F90")
                               or name == "ifs-test/share/ifs_test/namelist"):
                texts[name] = tar.extractfile(m).read().decode("latin-1")
    return texts


@pytest.fixture(scope="module")
def declared(source):
    found: dict[str, set[str]] = {}
    for name, text in source.items():
        if name.endswith((".nam.h", ".F90")) and "NAMELIST" in text.upper():
            for group, names in declarations(text).items():
                found.setdefault(group, set()).update(names)
    return found


def test_every_variable_set_is_declared_in_its_group(declared):
    assert {"NAMCT0", "NAMARG", "NAMDYNCORE", "NAMVV0"} <= set(declared)
    for case in idealised.CASES.values():
        for group, values in idealised.namelist_groups(case.namelist.read_text()).items():
            assert group in declared, f"{case.name}: no NAMELIST /{group}/ in 48r1.1.0"
            unknown = {k.split("(")[0] for k in values} - declared[group]
            assert not unknown, f"{case.name}: &{group} has no {sorted(unknown)}"
    # the output modes' switches too
    for switches in idealised.OUTPUT_MODES.values():
        for group, key, _ in switches:
            assert key in declared[group]


def test_the_composed_namelist_has_every_group_of_ifs_tests_list(source):
    empty = source["ifs-test/share/ifs_test/namelist"]
    listed = [g for g, _ in idealised.parse_namelist(empty)]
    for mode in idealised.OUTPUT_MODES:
        names = [g for g, _ in idealised.parse_namelist(
            idealised.fort4("hs_t21l19", mode, 2, empty))]
        assert set(listed) <= set(names)
        # NAMARG and NAMCT0 are not in ifs-test's list (its tests write them): ours are
        assert {"NAMARG", "NAMCT0"} <= set(names) - set(listed)


def test_what_the_comments_rely_on_is_in_the_code(source):
    code = {name.rsplit("/", 1)[-1]: text for name, text in source.items()}
    # NSUPERSEDE=0: suarg.F90 opens the initial file only when it is 1; N3DINI=2 builds the
    # academic state, and sugridf.F90 reads surface fields only when N3DINI is 0
    assert "NSUPERSEDE=1" in code["suarg.F90"] and "IF(NSUPERSEDE==1) THEN" in code["suarg.F90"]
    assert "ELSEIF( N3DINI == 2 ) THEN" in code["suspec.F90"]
    assert code["sugridf.F90"].count("(N3DINI == 0)") == 2
    # the test cases, and the warning sudyncore.F90 prints for any case above 12
    assert "IF (KTESTCASE == 71) THEN" in code["sumisc_spec.F90"]
    assert "IF( (KTESTCASE == 161) .OR. (KTESTCASE == 162)) THEN" in code["sudcmip16_spec.F90"]
    assert "IF((KTESTCASE == 162)) THEN" in code["sudcmip16_gu.F90"]
    assert "INVALID CHOICE FOR NTESTCASE: -1..12" in code["sudyncore.F90"]
    # built-in L19 and L31
    assert "IF (KFLEV == 19) THEN" in code["sudefo_vv1.F90"]
    assert "ELSEIF (KFLEV == 31) THEN" in code["sudefo_vv1.F90"]
    # the output switches: N1POS/N1HIS default 1 (suct1.F90); the end the check looks for
    assert "N1POS=1" in code["suct1.F90"] and "N1HIS=1" in code["suct1.F90"]
    assert "' *** END CNT0 *** '" in code["cnt0.F90"]
    # FDB output through MultIO's IFS interface
    assert "IMULTIO_WRITE" in code["fdbsubs_mod.F90"]
