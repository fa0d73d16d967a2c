"""OpenifsCheck's wiring on OpenIFS's real ifs-test (from the source mirror's OpenIFS
48r1.1.0), with a stand-in data directory and a stand-in launcher in place of the model:
the data is staged as storage.yaml's `type: file` source would be, the test directory is
made as ifs-test's CMake makes it, the test's own setup writes its namelist (LFDBOP from
the environment), ifs-test's own ifs-run starts the launcher, ifs-check-bitid saves and
then checks the norms, and the fields FDB holds are compared with the GRIB files. None of
it is a model result: tests/integration/openifs_standin/launch-standin writes the files.
Where the data is absent, the check is skipped with one line and never passes."""
import os
import pathlib
import re
import shutil
import subprocess
import tarfile

import pytest
import yaml

from iostack.core import paths
from iostack.spack import config as spack_config
from iostack.regression import results
from iostack_rfm.jobs import ifstest
from support import targets

OPENIFS_48R1 = "6c93ad58cdb9711b088e7af3025a5b6de3780697"
STANDIN = pathlib.Path(__file__).parent / "openifs_standin"
CASES = ("test_fc", "test_np2", "test_nt2")

pytestmark = pytest.mark.skipif(not all(shutil.which(p) for p in ("grib_set", "fdb-write",
                                                                   "codes_info", "perl")),
                                reason="needs ecCodes' and FDB's tools and perl")


def mirror_tarball() -> pathlib.Path | None:
    """OpenIFS 48r1.1.0's source in the registered source mirror (bin/iostack setup)."""
    conf = spack_config.registered_mirrors_file(targets.settings().cache)
    if not conf.is_file():
        return None
    for url in re.findall(r'url:\s*"?(file://[^"\s]+)', conf.read_text()):
        path = pathlib.Path(url.removeprefix("file://")) / "_source-cache" / "git" / \
            "ecmwf-ifs" / "openifs.git" / f"{OPENIFS_48R1}.tar.gz"
        if path.is_file():
            return path
    return None


@pytest.fixture(scope="module")
def ifs_test(tmp_path_factory):
    tarball = mirror_tarball()
    if tarball is None:
        pytest.skip("OpenIFS 48r1.1.0 is not in the registered source mirror (bin/iostack "
                    "setup --spack-bundle)")
    out = tmp_path_factory.mktemp("openifs")
    with tarfile.open(tarball) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith("openifs/ifs-test/")]
        tar.extractall(out, members=members)
    return out / "openifs" / "ifs-test"


def t21_entries(ifs_test):
    files = yaml.safe_load((ifs_test / "storage.yaml").read_text())["external_data"]["files"]
    return [(e["source_path"], e["target_path"], e["extract_path"]) for e in files
            if e.get("extract_path") in ("ifsdata", "t21/inidata")]


@pytest.fixture(scope="module")
def standin_data(ifs_test, tmp_path_factory):
    """A `type: file` data source holding stand-ins of the files the t21 tests need."""
    root = tmp_path_factory.mktemp("ifs-test-data")
    for source, _, extract in t21_entries(ifs_test):
        content = tmp_path_factory.mktemp("content")
        names = (["ICMGGepc8INIT", "ICMGGepc8INIUA", "ICMSHepc8INIT"]
                 if extract == "t21/inidata" else ["rtables-standin"])
        for name in names:
            (content / name).write_text(f"stand-in {name}\n")
        (root / source).parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(root / source, "w:gz") as tar:
            for name in names:
                tar.add(content / name, arcname=name)
    return root


def test_storage_yaml_names_the_t21_data(ifs_test):
    entries = t21_entries(ifs_test)
    assert sorted(e[2] for e in entries) == ["ifsdata", "t21/inidata"]
    assert all(s.startswith("48r1/") and s.endswith(".tar.gz") for s, _, _ in entries)


def test_stage_and_case_as_ifs_test_makes_them(ifs_test, standin_data, tmp_path):
    cache = tmp_path / "cache"
    assert ifstest.stage(str(standin_data), str(cache), t21_entries(ifs_test)) == 2
    assert (cache / "t21" / "inidata" / "ICMSHepc8INIT").read_text() == "stand-in ICMSHepc8INIT\n"
    case = pathlib.Path(ifstest.make_case(str(ifs_test), "t21/test_np2", str(cache),
                                          str(tmp_path / "run"), "/opt/ifsMASTER.SP", "48r1",
                                          "/usr/share/eccodes"))
    for name in ifstest.BIN_LINKS + ("setup", "params", "postprocessing", "ICMGGepc8IMIN",
                                     "ifsdata"):
        assert (case / name).exists(), name
    assert "export IFS_EXECUTABLE=/opt/ifsMASTER.SP" in (case / "ifs_env").read_text()
    # the test's own setup (sourcing ../common) writes its namelist, LFDBOP from the environment
    p = subprocess.run(["bash", "-c", "set -a; WORK_DIR=$PWD; . ./setup"], cwd=case,
                       env={**os.environ, "LFDBOP": ".TRUE."}, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    fort4 = (case / "fort.4").read_text()
    assert re.search(r"LFDBOP=\.TRUE\.", fort4) and "CSTOP" in fort4
    assert (case / "params").read_text().strip() == "NPROC=2"


def test_stage_refuses_a_root_without_the_files_in_one_line(ifs_test, tmp_path, capsys):
    rc = ifstest.main(["stage", "--root", str(tmp_path), "--cache", str(tmp_path / "c"),
                       *[a for s, t, e in t21_entries(ifs_test) for a in ("--entry", s, t, e)]])
    out = capsys.readouterr().out.strip().splitlines()
    assert rc == 1 and len(out) == 1
    assert out[0].startswith(f"ifstest: ERROR {tmp_path} lacks 48r1/")
    assert not (tmp_path / "c").exists()


def nightly(root, *options, env=None, name="OpenifsCheck"):
    p = subprocess.run([str(paths.REPO / "bin" / "iostack"), "nightly", "--site", "local",
                        "--root", str(root), "--", "-n", name,
                        "-S", "valid_prog_environs=builtin", *options],
                       capture_output=True, text=True, timeout=1800,
                       env={**os.environ, **(env or {})})
    print(p.stdout[-6000:], p.stderr[-3000:])
    reports = results.run_reports(root / "reframe")
    assert reports, "ReFrame wrote no report"
    return p, results.last_attempts(results.read_report(reports[-1]))


def test_without_data_the_check_is_skipped_in_one_line_never_passed(ifs_test, tmp_path):
    empty = tmp_path / "no-data"
    empty.mkdir()
    p, cases = nightly(tmp_path / "root", "-S", f"OpenifsCheck.ifs_test={ifs_test}",
                       "-S", f"OpenifsCheck.test_data={empty}")
    assert sorted(tc["name"].split()[0] for tc in cases.values()) == ["OpenifsCheck"] * 3
    assert {tc["result"] for tc in cases.values()} == {"skip"}
    # ReFrame's report keeps no skip reason: its output does, one line per test case
    output = re.sub(r"\x1b\[[0-9;]*m", "", p.stdout)
    skips = re.findall(r"^\[ +SKIP \] \(\d/3\) OpenifsCheck %case=(\w+) .*? \[(.*)\]$",
                       output, re.M)
    assert sorted(case for case, _ in skips) == sorted(CASES)
    (reason,) = {why for _, why in skips}
    assert reason.startswith(f"no OpenIFS test data in {empty}: it needs ifs-test "
                             "storage.yaml's 48r1/")
    for source, _, _ in t21_entries(ifs_test):
        assert source in reason


def job_output(tc, name):
    for d in (tc["outputdir"], tc["stagedir"]):
        if d and os.path.isfile(os.path.join(d, name)):
            return pathlib.Path(d, name).read_text()
    raise AssertionError(f"no {name} for {tc['name']}")


@pytest.fixture(scope="module")
def standin_runs(ifs_test, standin_data, tmp_path_factory):
    """Two sessions on one deployment root: the first saves each test's norms, the second
    checks against them."""
    root = tmp_path_factory.mktemp("root")
    log = root / "launches.log"
    env = {"OIFS_EXEC": str(STANDIN / "ifsMASTER.SP"), "OIFS_CYCLE": "48r1",
           "STANDIN_LOG": str(log)}
    options = ["-S", f"OpenifsCheck.ifs_test={ifs_test}",
               "-S", f"OpenifsCheck.test_data={standin_data}",
               "-S", f"OpenifsCheck.norms_dir={root / 'norms'}",
               "-S", f"OpenifsCheck.launcher={STANDIN / 'launch-standin'}"]
    sessions = []
    for _ in range(2):
        p, cases = nightly(root, *options, env=env)
        # read now: the next session's test cases write the same output directories
        modes = {tc["name"]: re.findall(r"^bitid run=(\w+) mode=(\w+)$",
                                        job_output(tc, "rfm_job.out"), re.M)
                 for tc in cases.values()}
        compared = {tc["name"]: job_output(tc, "compare.out").strip().splitlines()[-1]
                    for tc in cases.values()}
        sessions.append((p, cases, modes, compared))
    return root, log, sessions


def test_standin_wiring_stages_launches_checks_norms_and_compares(standin_runs):
    root, log, sessions = standin_runs
    for p, cases, _, _ in sessions:
        assert {tc["name"].split()[0] for tc in cases.values()} == {"OpenifsCheck"}
        assert {n: tc["result"] for n, tc in cases.items()} == {n: "pass" for n in cases}
        assert p.returncode == 0
    # ifs-run started the launcher twice per test per session, with the test's tasks
    launches = log.read_text().splitlines()
    expected = {"test_fc": "1", "test_np2": "2", "test_nt2": "1"}
    for case, nproc in expected.items():
        runs = [line for line in launches if line.endswith(f"in {case} LFDBOP=.FALSE.")
                or line.endswith(f"in {case} LFDBOP=.TRUE.")]
        assert len(runs) == 4, case
        assert all(f"-np {nproc} {STANDIN / 'ifsMASTER.SP'}" in line for line in runs)
    # first session: norms saved (init) and kept for the releases after; second: checked
    assert all(m == [("grib", "init"), ("fdb", "check")] for m in sessions[0][2].values())
    assert all(m == [("grib", "check"), ("fdb", "check")] for m in sessions[1][2].values())
    assert sorted(p.parent.name for p in (root / "norms").rglob("SAVED_NORMS")) == sorted(CASES)
    # the FDB run's fields are the GRIB run's, bit for bit: two fields per output step, an
    # output every 6 steps up to CSTOP (test_fc's t25; the t21 namelists' t6 otherwise)
    steps = {"test_fc": 5, "test_np2": 2, "test_nt2": 2}
    for _, _, _, compared in sessions:
        assert len(compared) == 3
        for name, last in compared.items():
            n = steps[name.split("%case=")[1].split()[0]]
            assert re.search(rf"files={2 * n} steps={n} messages={2 * n} identical={2 * n} "
                             rf"fdb_fields={2 * n} bytes_grib=(\d+) bytes_fdb=\1 "
                             "RESULT=IDENTICAL$", last), last


def test_a_changed_norm_fails_the_next_release(standin_runs, ifs_test, standin_data):
    """The saved norms are the reference: a run whose norms differ fails its check."""
    root, log, _ = standin_runs
    saved = root / "norms" / "ifsMASTER.SP" / "test_fc" / "SAVED_NORMS"
    saved.write_text(saved.read_text().replace("0.247383251E+03", "0.247383252E+03"))
    p, cases = nightly(root, "-S", f"OpenifsCheck.ifs_test={ifs_test}",
                       "-S", f"OpenifsCheck.test_data={standin_data}",
                       "-S", f"OpenifsCheck.norms_dir={root / 'norms'}",
                       "-S", f"OpenifsCheck.launcher={STANDIN / 'launch-standin'}",
                       env={"OIFS_EXEC": str(STANDIN / "ifsMASTER.SP"), "OIFS_CYCLE": "48r1",
                            "STANDIN_LOG": str(log)}, name="OpenifsCheck%case=test_fc")
    (tc,) = cases.values()
    assert tc["result"] == "fail"
    assert "step model-grib exited with 1" in tc["fail_reason"]
    assert "Bit-identical test FAILED" in job_output(tc, "grib.ifs-run.log")
    assert p.returncode != 0
