"""Spack tier: runs where the pinned Spack is available (see bin/iostack setup). Where
IOSTACK_REQUIRE_SPACK is set (.ci/run sets it), a missing Spack fails instead of skipping.

The tier deploys the `local` site once, from source (`local_deploy`), and pushes it to a
signed build cache once (`local_buildcache`); the tests of set-up, mirrors, caches and
bundles use those two."""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import time

import pytest

from iostack.core import paths
from iostack.offline import bundle
from iostack.spack import config, runner
from support import account, exectrace, targets
from support.budget import COLD_DEPLOY

IOSTACK = str(paths.REPO / "bin" / "iostack")
# What the local site builds from the mirror's sources; all else is a Debian external.
LOCAL_BUILT = {"ecbuild", "eckit", "metkit", "fdb", "multio", "ior", "io500",
               "netcdf-output-bench", "fdb-archive-bench", "nvme-stage", "compiler-wrapper",
               "gcc-runtime", "darshan-runtime", "darshan-util"}


@pytest.fixture(scope="session")
def spack_available():
    try:
        return runner.locate(targets.settings())
    except runner.SpackMissing as e:
        if os.environ.get("IOSTACK_REQUIRE_SPACK"):
            pytest.fail(f"Spack tier required (IOSTACK_REQUIRE_SPACK) but: {e}")
        pytest.skip(f"Spack tier skipped: {e}")


@pytest.fixture(autouse=True)
def _needs_spack(spack_available):
    return spack_available


@dataclasses.dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("iostack: error:")]


def iostack(*args, env=None, timeout=1800, cwd=None) -> Run:
    start = time.monotonic()
    p = subprocess.run([IOSTACK, *map(str, args)], capture_output=True, text=True,
                       env={**os.environ, **(env or {})}, timeout=timeout, cwd=cwd)
    run = Run(p.returncode, p.stdout, p.stderr, time.monotonic() - start)
    print(f"$ iostack {' '.join(map(str, args))}  # rc {p.returncode}, {run.seconds:.0f} s")
    print(p.stdout[-4000:], p.stderr[-4000:])
    return run


# Spack's install log: what it built from source, what it took from a build cache, what it
# fetched, and each package's build time.
_FROM_SOURCE = re.compile(r"No binary for (\S+?)-[\d.][^\s]*-[a-z0-9]{32} found: installing from source")
_FROM_CACHE = re.compile(r"Extracting (\S+?)-[\d.][^\s]*-[a-z0-9]{32} from binary cache")
_FETCHED = re.compile(r"==> Fetching (\S+)")
_INSTALLED = re.compile(r"==> (\S+): Successfully installed \S+\n.*?Total: ([^\n]+)", re.S)


def built_from_source(output: str) -> set[str]:
    return set(_FROM_SOURCE.findall(output))


def installed_from_cache(output: str) -> set[str]:
    return set(_FROM_CACHE.findall(output))


def fetched_urls(output: str) -> list[str]:
    return _FETCHED.findall(output)


def build_times(output: str) -> dict[str, str]:
    return dict(_INSTALLED.findall(output))


def installed_prefixes(root: pathlib.Path) -> list[str]:
    """Package prefixes in a deployment's install tree (not Spack's database): the
    <name>-<version>-<hash:7> projection, not Spack's own bin/sbang (installed only where a
    script's shebang grew too long for the kernel)."""
    opt = root / "opt"
    return sorted(p.name for p in opt.iterdir()
                  if re.fullmatch(r"[\w.+-]+-[a-z0-9]{7}", p.name)) if opt.is_dir() else []


@pytest.fixture(scope="session")
def local_deploy(tmp_path_factory, timings):
    """`local` deployed from source into a fresh root, its release made current:
    (root, the deploy's Run). IOSTACK_TEST_LOCAL_DEPLOY names a root an earlier run of the
    tier deployed instead (a developer's shortcut past the cold build, for a few tests: the
    tests change it); CI never sets it."""
    reused = os.environ.get("IOSTACK_TEST_LOCAL_DEPLOY")
    if reused:
        return pathlib.Path(reused), Run(0, "", "", float("nan"))
    root = tmp_path_factory.mktemp("local-from-source")
    run = iostack("deploy", "--site", "local", "--root", root, "--skip-regression",
                  timeout=COLD_DEPLOY)
    assert run.returncode == 0, run.error_lines
    # untested releases are never made current by deploy; the tests run the checks
    (release,) = (root / "releases").glob("2*")
    assert iostack("switch", "--root", root, release.name, "--force").returncode == 0
    timings["deploy local, cold (from source)"] = run.seconds
    for package, total in sorted(build_times(run.output).items()):
        timings[f"  build {package}"] = total
    return root, run


@pytest.fixture(scope="session")
def local_buildcache(local_deploy, timings):
    """The source deployment pushed to a signed build cache under its root."""
    root, _ = local_deploy
    run = iostack("buildcache", "push", "--site", "local", "--root", root)
    assert run.returncode == 0, run.error_lines
    timings["buildcache push local"] = run.seconds
    return root / "buildcache"


@pytest.fixture(scope="session")
def traced_nightly(local_deploy, timings, tmp_path_factory):
    """The nightly mode on the Spack-built stack and the node's own (`stack` and `builtin`),
    every execve of it traced (tests/support/exectrace.py). One repeat of the repeated
    figures, and performance not judged: CI's node is no reference (the gates are the
    campaign's, tools/testbed/iostack_testbed/campaign.py). One run for the session: the
    tests of what it ran (test_spack_local's listing, test_spack_multio's comparisons) read
    its report."""
    root, _ = local_deploy
    trace = tmp_path_factory.mktemp("trace") / "execve.trace"
    # -S, not -p: ReFrame 4.10 loses -p when it expands the nightly --mode
    start = time.monotonic()
    p = subprocess.run(
        [*exectrace.STRACE, "-o", str(trace), str(IOSTACK), "nightly", "--site", "local",
         "--root", str(root), "--", "--skip-performance-check",
         # a traced process cannot be ptraced again: the throughput checks' own strace
         # (their sync audit and per-field profile) fails under this trace; the integration
         # tier runs them
         "-S", "audit_steps=0", "-S", "profile_steps=0",
         # and WorkCountsCheck's strace would fail the same way: test_spack_counts runs it
         "-x", "WorkCountsCheck",
         "-S", "FdbThroughputCheck.repeats=1", "-S", "FdbWriterScalingCheck.repeats=1",
         "-S", "MultioHammerThroughputCheck.repeats=1",
         "-S", "IO500Check.repeats=1", "-S", "NetcdfOutputCheck.repeats=1"],
        capture_output=True, text=True, timeout=1800)
    timings["nightly mode on the Spack stack and Debian's (local), traced"] = \
        time.monotonic() - start
    print(p.stdout[-4000:], p.stderr[-2000:])
    reports = sorted((root / "current" / "reframe" / "reports").glob("run-report-*.json"),
                     key=os.path.getmtime)
    return p, json.loads(reports[-1].read_text()), exectrace.executions(trace.read_text())


@pytest.fixture
def short_root(local_deploy):
    """A fresh deployment root no longer than the one the build cache was built in: Spack
    cannot grow a prefix stored in a binary (it refuses, naming
    config:install_tree:padded_length), so a cache installs into the same or a shorter root."""
    top = account.give(pathlib.Path(tempfile.mkdtemp(prefix="iostack-", dir="/tmp")))
    root = top / "root"
    assert len(str(root / "opt")) <= len(str(local_deploy[0] / "opt"))
    yield root
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def scratch_cache(tmp_path):
    """An iostack cache directory of its own (IOSTACK_CACHE): the real Spack trees and their
    index, but its own registered mirrors and an empty key ring. Returns (env, cache).
    tmp_path becomes root's: root runs the Spack this cache points to, and refuses a tree
    in a directory another user owns (iostack.core.trust)."""
    cache = account.for_root(tmp_path) / "cache"
    cache.mkdir()
    spack_root, spack_packages = runner.locate(targets.settings())
    (cache / "spack").symlink_to(spack_root)
    (cache / "spack-packages").symlink_to(spack_packages)
    # and the node's index of those recipes (runner.misc_cache: the same Spack and checkout,
    # so the same key), which a new cache would spend a minute of CPU making again; it is
    # kept by whoever runs Spack: the service account, when the suite runs as root
    shared_misc = account.state(targets.settings()) / "spack-misc"
    state = account.state(targets.settings(IOSTACK_CACHE=cache))
    for made in (shared_misc, state):
        made.mkdir(parents=True, exist_ok=True)
        if account.service():
            account.give(made)
    (state / "spack-misc").symlink_to(shared_misc)
    return {"IOSTACK_CACHE": str(cache), "SPACK_ROOT": "", "IOSTACK_SPACK_PACKAGES": ""}, cache


def register_source_mirror(cache: pathlib.Path, mirror: pathlib.Path) -> None:
    f = config.registered_mirrors_file(cache)
    f.parent.mkdir(parents=True, exist_ok=True)
    config.write_mirrors(f, bundle.bundle_mirrors(mirror, None), replace=True, written_by="the Spack tier")


from support.fixtures import shared_bundle  # noqa: E402,F401  (the tier's tests import it from here)
