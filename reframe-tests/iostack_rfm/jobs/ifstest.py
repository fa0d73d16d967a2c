"""OpenIFS's own test suite, ifs-test, without its CMake: the job-side half of OpenifsCheck
(checks/openifs.py). Standard library only.

    python3 -m iostack_rfm.jobs.ifstest stage --root DATA --cache DIR --entry SOURCE TARGET [EXTRACT] ...
    python3 -m iostack_rfm.jobs.ifstest case --ifs-test DIR --case t21/test_fc --cache DIR \\
        --out RUN --executable IFSMASTER --cycle 48r1 --eccodes-share DIR

ifs-test's CMake fetches its input data (storage.yaml: ifsdata, t21 inidata, ...) with
bin/storage.py, which needs click, PyYAML and requests from PyPI and falls back to
downloading from ECMWF, and then makes one directory per test with ctest running
`./ifs-run` in it. Neither is possible on an air-gapped node. Here:

- `stage` does what storage.py's `fetch` does with a `type: file` data source: for each
  storage.yaml entry (source_path, target_path, extract_path) it copies ROOT/source_path
  to CACHE/target_path and unpacks that archive into CACHE/extract_path. A missing file is
  one line naming it, exit 1. Nothing is downloaded.
- `case` makes the test's directory as tests/t21/CMakeLists.txt's add_ifs_test does (the
  forecast tests' links: the bin/ scripts, ifs_env, the t21 initial files under their
  experiment names, ifsdata, the test's setup/params/postprocessing) beside a link to
  tests/t21/common, which each test's setup sources as ../common. ifs_env is written as
  share/ifs_test/ifs_env.in would be configured, with the executable and cycle given.

The test then runs as ctest would: `./ifs-run` in its directory (with IFS_TEST_BITIDENTICAL
`init` to save its norms as SAVED_NORMS, `check` to compare with them; bin/ifs-check-bitid).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys

#: bin/ scripts every test directory links (tests/t21/CMakeLists.txt add_ifs_test)
BIN_LINKS = ("ifs-run", "ifs-debug", "ifs-clean", "ifs-check-bitid", "ifs-check-tracers",
             "ifs-grep-norms.pl", "set_launcher.bash")
#: the t21 initial files of the forecast tests, under the names the tests read
T21_INIDATA = {"ICMGGepc8INIT": "ICMGGepc8INIT", "ICMGGepc8INIUA": "ICMGGepc8INIUA",
               "ICMSHepc8INIT": "ICMSHepc8INIT", "ICMGGepc8IMIN": "ICMGGepc8INIT",
               "ICMGGepc8IMIUA": "ICMGGepc8INIUA", "ICMSHepc8IMIN": "ICMSHepc8INIT"}
#: the t21 tests whose directory `case` can make: forecasts from the epc8 initial files
#: with nothing but ifsdata besides (the labels `forecast serial/mpi/threading`)
FORECAST_CASES = ("test_fc", "test_np2", "test_nt2")


class StageError(RuntimeError):
    pass


def stage(root: str, cache: str, entries: list[tuple[str, str, str | None]]) -> int:
    """storage.py fetch from a `type: file` source `root`; returns the entries staged."""
    missing = [src for src, _, _ in entries if not os.path.isfile(os.path.join(root, src))]
    if missing:
        raise StageError(f"{root} lacks {', '.join(missing)}")
    for src, target, extract in entries:
        target_path = os.path.join(cache, target)
        os.makedirs(os.path.dirname(target_path), exist_ok=True)
        if not os.path.exists(target_path):
            shutil.copyfile(os.path.join(root, src), target_path)
        if extract:
            extract_path = os.path.join(cache, extract)
            if not os.path.isdir(extract_path):
                shutil.unpack_archive(target_path, extract_path)
    return len(entries)


IFS_ENV = """\
# written by iostack_rfm.jobs.ifstest, as ifs-test's share/ifs_test/ifs_env.in would be configured
export GRIB_DEFINITION_PATH={eccodes}/definitions
export GRIB_SAMPLES_PATH={eccodes}/ifs_samples/grib1_mlgrib2
export IFS_EXECUTABLE={executable}
export IFS_CYCLE={cycle}
export IFS_NAMELIST={namelist}
export IFS_NUNDEFLD=-99999
export IFS_HAVE_OOPS=0
export NUNDEFLD=-99999
"""


def make_case(ifs_test: str, case: str, cache: str, out: str, executable: str, cycle: str,
              eccodes_share: str) -> str:
    """The directory of t21 test `case` under `out` (out/t21/<test>); returns its path."""
    group, test = case.split("/")
    if group != "t21" or test not in FORECAST_CASES:
        raise StageError(f"{case}: only the t21 forecast tests {', '.join(FORECAST_CASES)}")
    source = os.path.join(ifs_test, "tests", group)
    if not os.path.isfile(os.path.join(source, test, "setup")):
        raise StageError(f"{source}/{test}/setup does not exist: not ifs-test's {case}")
    case_dir = os.path.join(out, group, test)
    os.makedirs(case_dir)
    os.symlink(os.path.join(source, "common"), os.path.join(out, group, "common"))
    for name in BIN_LINKS:
        os.symlink(os.path.join(ifs_test, "bin", name), os.path.join(case_dir, name))
    for name in ("setup", "params", "postprocessing"):
        if os.path.exists(os.path.join(source, test, name)):
            os.symlink(os.path.join(source, test, name), os.path.join(case_dir, name))
    inidata = os.path.join(cache, group, "inidata")
    for link, target in T21_INIDATA.items():
        os.symlink(os.path.join(inidata, target), os.path.join(case_dir, link))
    os.symlink(os.path.join(cache, "ifsdata"), os.path.join(case_dir, "ifsdata"))
    with open(os.path.join(case_dir, "ifs_env"), "w") as f:
        f.write(IFS_ENV.format(eccodes=eccodes_share, executable=executable, cycle=cycle,
                               namelist=os.path.join(ifs_test, "share", "ifs_test", "namelist")))
    return case_dir


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="ifstest", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("stage")
    s.add_argument("--root", required=True, help="the `type: file` data source")
    s.add_argument("--cache", required=True)
    s.add_argument("--entry", nargs="+", action="append", required=True,
                   metavar="SOURCE TARGET [EXTRACT]")
    c = sub.add_parser("case")
    c.add_argument("--ifs-test", required=True)
    c.add_argument("--case", required=True)
    c.add_argument("--cache", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--executable", required=True)
    c.add_argument("--cycle", required=True)
    c.add_argument("--eccodes-share", required=True, help="ecCodes' share/eccodes")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "stage":
            entries = []
            for e in args.entry:
                if len(e) not in (2, 3):
                    raise StageError(f"--entry {' '.join(e)}: SOURCE TARGET [EXTRACT]")
                entries.append((e[0], e[1], e[2] if len(e) == 3 else None))
            print(f"ifstest: staged {stage(args.root, args.cache, entries)} entries from "
                  f"{args.root} into {args.cache}")
        else:
            path = make_case(args.ifs_test, args.case, args.cache, args.out, args.executable,
                             args.cycle, args.eccodes_share)
            print(f"ifstest: case {args.case} in {path}")
        return 0
    except (StageError, OSError, shutil.ReadError) as e:
        print(f"ifstest: ERROR {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
