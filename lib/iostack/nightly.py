"""bin/iostack nightly: a site's ReFrame regression, stored with the stack it ran on.

Every session gets, through ReFrame's `--session-extras`, the repository commit and the
sha256 of the site's spack.lock, so each stored result names the exact stack; `report` and
`record-baseline` read them back from the results DB.

ReFrame reports PASSED when no test case was selected (ReFrame issue #3599) and 4.10 has
no option against it, so the run's JSON report is checked here: no report, or one with no
test cases, is a failure.
"""
from __future__ import annotations

import hashlib
import pathlib
import subprocess

from iostack import paths, reframe, references, results, stack

RC_NO_TESTS = 3


def git_commit() -> str:
    """HEAD's commit, with `-dirty` when the work tree has changes."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=paths.REPO, capture_output=True,
                              text=True).stdout.strip()
    commit = git("rev-parse", "HEAD") or "unknown"
    if git("status", "--porcelain", "--untracked-files=no"):
        commit += "-dirty"
    return commit


def spack_lock_sha256(site: str) -> str:
    lock = stack.lock_path(site)
    return hashlib.sha256(lock.read_bytes()).hexdigest() if lock.is_file() else "none"


def session_extras(site: str) -> dict[str, str]:
    return {"site": site, "commit": git_commit(), "spack_lock_sha256": spack_lock_sha256(site)}


def _no_baseline_hints(report: dict, site: str) -> list[str]:
    """One line per failed case whose reference is the no-baseline placeholder."""
    hints = []
    for tc in results.last_attempts(report).values():
        if tc.get("result") != "fail" or tc.get("fail_phase") != "performance":
            continue
        if any(references.is_no_baseline(pv.ref) for pv in results.perf_values(tc).values()):
            hints.append(f"  {tc['name']} @{tc['system']}:{tc['partition']}: "
                         f"bin/iostack record-baseline --site {site} --system "
                         f"{tc['system']} --check {results.check_of(tc)}")
    return sorted(set(hints))


def run(site: str, system: str, root: pathlib.Path, extra=(), mode=None,
        local_slurm: bool = False) -> int:
    state = root / "reframe"
    before = set(results.run_reports(state))
    extras = ",".join(f"{k}={v}" for k, v in session_extras(site).items())
    env_extra = {}
    cluster = None
    if local_slurm:
        from iostack import cluster as multinode
        from iostack import slurm

        if system == "local-cluster":
            cluster = multinode.LocalCluster(root / "cluster")
            print(f"iostack: starting the multi-node cluster in {cluster.state}")
        else:
            cluster = slurm.LocalSlurm(root / "slurm")
            print(f"iostack: starting a single-node Slurm cluster in {cluster.state}")
        try:
            cluster.start()
        except (slurm.SlurmUnavailable, slurm.SlurmStartError, multinode.ClusterError) as e:
            print(f"iostack: error: local Slurm cluster: {e}")
            return 2
        env_extra.update(cluster.env())
    try:
        rc = reframe.reframe(system, root, extra=["--session-extras", extras, *extra],
                             mode=mode, env_extra=env_extra)
    finally:
        if cluster is not None:
            cluster.stop()
            print("iostack: local Slurm cluster stopped")

    new = [r for r in results.run_reports(state) if r not in before]
    cases = 0
    report = {}
    if new:
        report = results.read_report(new[-1])
        cases = report.get("session_info", {}).get("num_cases", 0)
    if not cases:
        print(f"iostack: error: ReFrame ran no test case on system {system} (mode "
              f"{mode or 'none'}, options {' '.join(extra) or 'none'}): it would report "
              "PASSED (ReFrame issue #3599); check the selection (-n/-t/-p) and the "
              "partitions' features")
        return rc or RC_NO_TESTS
    hints = _no_baseline_hints(report, site)
    if hints:
        print("iostack: these failed for want of a recorded baseline; record one from this "
              "run and commit reframe-tests/references/:\n" + "\n".join(hints))
    return rc
