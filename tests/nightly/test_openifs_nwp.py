"""OpenIFS 48r1.1.0 built offline from the source mirror: the local site's `nwp` environment
deployed cold into a fresh root (over an hour of Fortran: CI only fetches its sources and
concretizes it, tests/spack/test_spack_openifs.py). ifsMASTER must be built and resolve
every library it links, `module load openifs-env` must give it to users, OpenifsCheck
must skip, in one line, where the site has none of ifs-test's data (nothing downloads), and
the idealised forecasts, which need none, must run: OpenifsIdealisedCheck's `fdb` variant of
every case (no output, GRIB files and FDB, 3 repeats each) through the nightly."""
import json
import os
import pathlib
import re
import subprocess
import time

import pytest

from iostack.core import paths

IOSTACK = str(paths.REPO / "bin" / "iostack")
# Spack's install log: each package's build time
_INSTALLED = re.compile(r"==> (\S+): Successfully installed \S+\n.*?Total: ([^\n]+)", re.S)


def iostack(*args, timeout=6 * 3600):
    start = time.monotonic()
    p = subprocess.run([IOSTACK, *map(str, args)], capture_output=True, text=True,
                       timeout=timeout)
    print(f"$ iostack {' '.join(map(str, args))}  # rc {p.returncode}, "
          f"{time.monotonic() - start:.0f} s\n{p.stdout[-4000:]}{p.stderr[-4000:]}")
    return p, time.monotonic() - start


@pytest.fixture(scope="module")
def nwp_deploy(tmp_path_factory, timings):
    """`local/nwp` deployed cold into a fresh root: (root, its release). IOSTACK_TEST_NWP_DEPLOY
    names a root an earlier cold deploy made instead (a developer's shortcut past the hour's
    build, as IOSTACK_TEST_LOCAL_DEPLOY is the Spack tier's; the tests switch its release).
    The nightly workflow never sets it."""
    reused = os.environ.get("IOSTACK_TEST_NWP_DEPLOY")
    if reused:
        (release,) = (pathlib.Path(reused) / "releases").glob("2*")
        return pathlib.Path(reused), release
    root = tmp_path_factory.mktemp("nwp")
    p, seconds = iostack("deploy", "--site", "local", "--env", "nwp", "--root", root,
                         "--skip-regression")
    assert p.returncode == 0, p.stderr[-3000:]
    timings["deploy local/nwp (OpenIFS 48r1.1.0), cold"] = seconds
    for package, total in sorted(_INSTALLED.findall(p.stdout + p.stderr)):
        timings[f"  build {package}"] = total
    (release,) = (root / "releases").glob("2*")
    return root, release


def test_ifsmaster_is_built_and_links_what_it_needs(nwp_deploy):
    root, _ = nwp_deploy
    (prefix,) = (root / "opt").glob("openifs-48r1.1.0-*")
    master = prefix / "bin" / "ifsMASTER.SP"
    assert master.is_file() and os.access(master, os.X_OK)
    ldd = subprocess.run(["ldd", str(master)], capture_output=True, text=True)
    assert ldd.returncode == 0 and "not found" not in ldd.stdout, ldd.stdout
    # the MultIO and FDB it writes with are the stack's, not Debian's
    for lib in ("libmultio.so", "libfdb5.so", "libeckit.so"):
        (line,) = [x for x in ldd.stdout.splitlines() if x.strip().startswith(lib)]
        assert str(root / "opt") in line, line
    assert (prefix / "share" / "openifs" / "ifs-test" / "storage.yaml").is_file()


def test_module_load_openifs_env_gives_ifsmaster(nwp_deploy):
    root, release = nwp_deploy
    (master,) = (root / "opt").glob("openifs-48r1.1.0-*/bin/ifsMASTER.SP")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LMOD", "MODULE"))}
    p = subprocess.run(["bash", "-c", "source /usr/share/lmod/lmod/init/bash && module use "
                        f"{release / 'modulefiles' / 'Core'} && module load openifs-env && "
                        "echo OIFS_EXEC=$OIFS_EXEC && command -v multio-sink fdb-read"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert f"OIFS_EXEC={master}" in p.stdout.splitlines()


def test_openifs_check_without_data_skips_in_one_line(nwp_deploy, tmp_path):
    root, release = nwp_deploy
    assert iostack("switch", "--site", "local", "--root", root, release.name,
                   "--force")[0].returncode == 0
    p, _ = iostack("nightly", "--site", "local", "--root", root, "--", "-n", "OpenifsCheck",
                   "-S", f"OpenifsCheck.test_data={tmp_path}")
    out = re.sub(r"\x1b\[[0-9;]*m", "", p.stdout)
    skips = re.findall(r"^\[ +SKIP \] \(\d/3\) OpenifsCheck %case=\w+ .*? \[(.*)\]$", out, re.M)
    assert len(skips) == 3 and len(set(skips)) == 1, out[-3000:]
    assert skips[0].startswith(f"no OpenIFS test data in {tmp_path}: it needs ifs-test")


#: the cases run (the `fdb` variant runs every output mode); the environment variable
#: narrows them for a quick look by hand (IOSTACK_OIFS_CASES=hs_t21l19)
CASES = os.environ.get("IOSTACK_OIFS_CASES", "hs_t21l19,hs_tl159l31,dcmip161_tl159l31").split(",")


def test_idealised_forecasts_run_and_fdb_holds_the_grib_files_fields(nwp_deploy, timings):
    root, release = nwp_deploy
    assert iostack("switch", "--site", "local", "--root", root, release.name,
                   "--force")[0].returncode == 0
    # ReFrame 4.10 matches `%output=fdb` alone against nothing: name both parameters
    selection = [a for case in CASES
                 for a in ("-n", f"OpenifsIdealisedCheck%case={case}%output=fdb")]
    p, seconds = iostack("nightly", "--site", "local", "--root", root, "--", *selection)
    timings[f"OpenifsIdealisedCheck, fdb variants ({', '.join(CASES)})"] = seconds
    (report,) = [line.removeprefix("iostack: ReFrame report: ") for line in
                 p.stdout.splitlines() if line.startswith("iostack: ReFrame report: ")]
    cases = {}
    for run in json.loads(open(report).read())["runs"]:
        for tc in run["testcases"]:
            cases[tc["name"]] = tc
    assert {n: tc["result"] for n, tc in cases.items()} == {n: "pass" for n in cases}, \
        {n: tc.get("fail_reason") for n, tc in cases.items()}
    assert p.returncode == 0
    ran = {re.search(r"%case=(\w+)", n).group(1) for n in cases if "%output=fdb" in n}
    assert ran == set(CASES)
    for tc in cases.values():
        values = {k.split(":")[-1]: v[0] for k, v in tc["perfvalues"].items()}
        # a forecast day with every field in FDB equal to the GRIB file's: T21L19 175 an
        # hour over 25 hours, TL159L31 235 over 25
        per_hour = 175 if "t21l19" in tc["name"] else 235
        assert values["messages_compared"] == 25 * per_hour
        # speeds are the check's to judge (its bands, on the node that recorded them), not an
        # ordering that a loaded night could cross: here each is measured and reported
        assert min(values[k] for k in ("days_per_day", "days_per_day_none",
                                       "days_per_day_grib")) > 0
        assert {"fdb_share", "grib_share"} <= values.keys()
        figures = open(os.path.join(tc["outputdir"], "figures.out")).read()
        for mode in ("none", "grib", "fdb"):
            assert f"oifs-idealised: norms mode={mode} runs=3 RESULT=IDENTICAL" in figures


#: netlib's reference BLAS (Debian's libblas3, `setup --with nightly`)
REFERENCE_BLAS = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3"


def idealised_run(root, case, output, tasks, threads, repeats=1):
    """One OpenifsIdealisedCheck variant through the nightly, with the reference BLAS
    preloaded: its ReFrame test case."""
    check = "OpenifsIdealisedCheck"
    p, _ = iostack("nightly", "--site", "local", "--root", root, "--",
                   "-n", f"{check}%case={case}%output={output}",
                   "-S", f"{check}.reference_blas={REFERENCE_BLAS}", "-S", f"{check}.tasks={tasks}",
                   "-S", f"{check}.threads={threads}", "-S", f"{check}.repeats={repeats}")
    (report,) = [line.removeprefix("iostack: ReFrame report: ") for line in
                 p.stdout.splitlines() if line.startswith("iostack: ReFrame report: ")]
    # the last attempt (the nightly retries a failed case once)
    return [tc for run in json.loads(open(report).read())["runs"] for tc in run["testcases"]][-1]


def test_with_a_reference_blas_every_output_mode_and_layout_prints_the_same_norms(nwp_deploy):
    """With the stack's OpenBLAS, output and the layout change the model's norms from step 1
    (docs/openifs-idealised.md, "Bit identity"). With the reference BLAS preloaded the check
    requires its modes to agree, and one kept set of norms holds every layout: DCMIP 161
    (no per-task noise) at 2x1 with no output, GRIB files and FDB, then 1x2 and 1x1 with no
    output; Held-Suarez T21 (its noise drawn per task) at 1x1 with every mode, then 1x2."""
    root, release = nwp_deploy
    assert iostack("switch", "--site", "local", "--root", root, release.name,
                   "--force")[0].returncode == 0
    runs = [("dcmip161_tl159l31", "fdb", 2, 1), ("dcmip161_tl159l31", "none", 1, 2),
            ("dcmip161_tl159l31", "none", 1, 1), ("hs_t21l19", "fdb", 1, 1),
            ("hs_t21l19", "none", 1, 2)]
    for i, (case, output, tasks, threads) in enumerate(runs):
        tc = idealised_run(root, case, output, tasks, threads)
        assert tc["result"] == "pass", (case, output, tasks, threads, tc.get("fail_reason"))
        out = pathlib.Path(tc["outputdir"])
        norms = (out / "norms.out").read_text()
        first = i in (0, 3)
        # the first run of a case keeps the norms; every other layout and mode must match
        assert ("saved in" in norms) == first and ("RESULT=IDENTICAL" in norms) != first, norms
        if output == "fdb":
            assert re.search(r"^oifs-idealised: norms across-modes none grib fdb "
                             r"RESULT=IDENTICAL$", (out / "figures.out").read_text(), re.M)


OPENIFS_SHIM = paths.REPO / "tests" / "support" / "counts" / "openifs_slowdown.c"


def test_openifs_step_counts_hold_to_the_references_and_a_2_percent_loop_fails_named(
        nwp_deploy, tmp_path, timings):
    """OpenifsWorkCountsCheck through the nightly: OpenIFS's time steps count what the
    committed references of this build say; with a busy loop of 2% of a step's
    instructions before every SCAN2M (the grid-point part of each step,
    tests/support/counts/openifs_slowdown.c) `bin/iostack counts check` fails, naming the
    loop."""
    import yaml

    from iostack.regression import counts

    root, release = nwp_deploy
    assert iostack("switch", "--site", "local", "--root", root, release.name,
                   "--force")[0].returncode == 0
    p, seconds = iostack("nightly", "--site", "local", "--root", root, "--", "-n",
                         "OpenifsWorkCountsCheck")
    timings["OpenifsWorkCountsCheck in the nightly"] = seconds
    assert p.returncode == 0, p.stdout[-3000:]
    ref = counts.reference_file(counts.release_programs(release, "local").build)
    per_step = yaml.safe_load(ref.read_text())["workloads"]["openifs-step"]["counts"][
        "instructions"]["value"]
    shim = tmp_path / "openifs_slowdown.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", shim, OPENIFS_SHIM, "-ldl"],
                   check=True)
    shim.chmod(0o755)
    env = {**os.environ, "LD_PRELOAD": str(shim),
           "IOSTACK_INJECT_INSTRUCTIONS": str(int(0.02 * per_step))}
    p = subprocess.run([IOSTACK, "counts", "check", "--root", root, "--workload",
                        "openifs-step"], capture_output=True, text=True, env=env,
                       timeout=3600)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]
    (moved,) = [line for line in p.stdout.splitlines() if line.startswith("MOVED")]
    assert moved.startswith("MOVED openifs-step: instructions per field ")
    assert 0.018 < float(moved.split("(")[1].split("%")[0]) / 100 < 0.022
    assert "grew: iostack_injected_busy_loop +" in moved
