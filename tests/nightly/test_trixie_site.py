"""A system no file in the repository describes, from zero: a fresh Debian 13 (trixie) root
(mmdebstrap minbase, tests/support/debian_root.py), where an admin runs the README's steps:
set-up from the offline bundle, `site init`, `lock --update`, `deploy`, then the nightly's
smoke and FDB bit-identity checks. Debian 13's names and versions differ from Debian 12's
(gcc 14, Open MPI 5.0.7, ecCodes 2.41.0, Python 3.13), so this fails where set-up or site
init knows only Debian 12. A cold build of eckit, metkit and FDB with gcc 14 in the root
takes longer than CI's budget: the nightly tier (README "A new site" has the times)."""
from __future__ import annotations

import json
import os
import re
import time

import pytest

from iostack.core import paths
from support import debian_root

SITE = "trixie-node"
CHECKS = ["-n", "StackSmokeCheck", "-n", "FdbBitIdentityCheck"]
#: Debian 13's versions (issue 21, checked against the trixie archive)
TRIXIE = {"gcc-14": "14.2.0", "openmpi-bin": "5.0.7", "libeccodes-dev": "2.41.0",
          "libeckit-dev": "1.28.7", "fdb5": "5.15.12", "lmod": "8.7.60"}
#: the output line of each package Spack built from source
FROM_SOURCE = re.compile(r"No binary for (\S+?)-[\d.][^\s]*-[a-z0-9]{32} found: installing from source")


def built_by_local() -> set[str]:
    """What local's committed lock builds (the rest are Debian externals)."""
    lock = json.loads((paths.SPACK_ENV_SITES / "local" / "spack.lock").read_text())
    return {s["name"] for s in lock["concrete_specs"].values() if not s.get("external")}


@pytest.fixture(scope="module")
def trixie(tmp_path_factory, offline_bundle, timings):
    """The root after each step: (root, {step: Run}). A step runs only if the one before
    passed; the tests name the first that did not."""
    root = debian_root.DebianRoot("trixie", tmp_path_factory.mktemp("trixie"))
    root.copy_repository()
    root.bind(offline_bundle, debian_root.BUNDLE_IN_ROOT, read_only=True)
    steps = {
        "set-up": ["bin/iostack", "setup", "--spack-bundle", debian_root.BUNDLE_IN_ROOT],
        "site init": ["bin/iostack", "site", "init", SITE],
        "lock": ["bin/iostack", "lock", "--update", SITE],
        # the deploy's regression: the two checks (the whole nightly needs `setup --with
        # nightly`: OpenFOAM, Slurm, the cross compilers)
        "deploy": ["bin/iostack", "deploy", "--site", SITE, "--", *CHECKS],
        "nightly": ["bin/iostack", "nightly", "--site", SITE, "--", *CHECKS],
    }
    runs = {}
    for step, cmd in steps.items():
        start = time.monotonic()
        runs[step] = root.run(cmd, timeout=6 * 3600)
        timings[f"Debian 13 root: {step}"] = time.monotonic() - start
        print(f"$ {' '.join(cmd)}  # rc {runs[step].returncode}\n{runs[step].output[-6000:]}")
        if runs[step].returncode != 0:
            break
    yield root, runs
    root.remove()


def passed(runs, step):
    assert step in runs, f"not reached: an earlier step failed ({', '.join(runs)})"
    run = runs[step]
    assert run.returncode == 0, run.output[-4000:]
    assert "Traceback" not in run.stderr
    return run


def test_set_up_installs_debian_13s_packages(trixie):
    root, runs = trixie
    passed(runs, "set-up")
    out = root.run(["dpkg-query", "-W", "-f=${Package} ${Version}\\n", *TRIXIE]).stdout
    versions = dict(line.split(" ", 1) for line in out.splitlines())
    for package, version in TRIXIE.items():
        # Debian's own revision and epoch around the upstream version; a repackaged older
        # release is spelled <newer>+really<older> (eckit: 1.29.1+really.1.28.7-1)
        assert re.match(rf"(\d+:)?({re.escape(version)}|\S*\+really\.?{re.escape(version)})\b",
                        versions[package]), (package, versions)


def test_site_init_describes_the_node_as_spack_finds_it(trixie):
    root, runs = trixie
    run = passed(runs, "site init")
    repo = root.path / debian_root.REPO_IN_ROOT.lstrip("/")
    facts = (repo / "sites" / f"{SITE}.yaml").read_text()
    assert "os: debian13" in facts and "libc: glibc@2.41" in facts
    packages = (repo / "spack-env" / "sites" / SITE / "packages.yaml").read_text()
    for spec in ("gcc@14.2.0", "openmpi@5.0.7", "eccodes@2.41.0", "python@3.13"):
        assert f"spec: {spec}" in packages, spec
    assert "linux-debian13-" in run.stdout
    for part in ("sites/trixie-node.yaml", "spack-env/sites/trixie-node",
                 "ansible/inventories/trixie-node"):
        assert part in run.stdout


def test_site_init_refuses_the_site_it_wrote(trixie):
    root, runs = trixie
    passed(runs, "site init")
    facts = root.path / debian_root.REPO_IN_ROOT.lstrip("/") / "sites" / f"{SITE}.yaml"
    before = facts.read_bytes()
    again = root.run(["bin/iostack", "site", "init", SITE])
    assert again.returncode == 2
    assert again.error_lines == [f"iostack: error: site {SITE} exists (sites/{SITE}.yaml, "
                                 f"spack-env/sites/{SITE}, ansible/inventories/{SITE}): "
                                 "nothing written"]
    assert facts.read_bytes() == before


def test_the_lock_builds_what_local_builds_and_takes_the_rest_from_debian(trixie):
    root, runs = trixie
    passed(runs, "lock")
    lock = json.loads((root.path / debian_root.REPO_IN_ROOT.lstrip("/") / "spack-env" / "sites"
                       / SITE / "spack.lock").read_text())
    built = {s["name"] for s in lock["concrete_specs"].values() if not s.get("external")}
    assert built == built_by_local()
    externals = {s["name"]: s["version"] for s in lock["concrete_specs"].values()
                 if s.get("external")}
    assert (externals["gcc"], externals["openmpi"], externals["eccodes"]) == (
        "14.2.0", "5.0.7", "2.41.0")


def test_deploy_builds_from_the_mirror_and_its_checks_pass(trixie):
    root, runs = trixie
    run = passed(runs, "deploy")
    assert set(FROM_SOURCE.findall(run.output)) == built_by_local()
    deployment = root.path / debian_root.REPO_IN_ROOT.lstrip("/") / "deploy" / SITE
    assert (deployment / "current" / "modulefiles" / "Core").is_dir()


def test_the_nightlys_smoke_and_bit_identity_checks_pass(trixie):
    root, runs = trixie
    passed(runs, "nightly")
    reports = sorted((root.path / debian_root.REPO_IN_ROOT.lstrip("/") / "deploy" / SITE
                      / "current" / "reframe" / "reports").glob("run-report-*.json"),
                     key=os.path.getmtime)
    report = json.loads(reports[-1].read_text())
    # each case's last attempt, by name and environment (one check runs in both)
    cases = {(tc["name"], tc["environ"]): tc for r in report["runs"] for tc in r["testcases"]}
    assert {k: tc["fail_reason"] for k, tc in cases.items() if tc["result"] != "pass"} == {}
    checks = {name.split()[0] for name, _ in cases}
    assert checks == {"StackSmokeCheck", "FdbBitIdentityCheck"}
    # the smoke check queried every root of the site's lock
    lock = json.loads((root.path / debian_root.REPO_IN_ROOT.lstrip("/") / "spack-env" / "sites"
                       / SITE / "spack.lock").read_text())
    smoked = {n for n, _ in cases if n.startswith("StackSmokeCheck")}
    assert len(smoked) == len({r["hash"] for r in lock["roots"]})
    # the bit-identity check ran on the stack's FDB 5.13 and on Debian 13's FDB 5.15
    assert {env for n, env in cases if n.startswith("FdbBitIdentityCheck")} == {"stack", "builtin"}


def test_no_daemon_of_the_root_runs_on_the_host(trixie):
    root, _ = trixie
    assert root.daemons() == []
