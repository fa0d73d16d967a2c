"""bin/iostack nightly: a site's ReFrame regression, stored with the stack it ran on, whose
verdict is true.

Every session gets, through ReFrame's `--session-extras`, the repository commit and the
sha256 of the site's spack.lock, so each stored result names the exact stack; `report` and
`record-baseline` read them back from the results DB.

A run passes only when ReFrame passed and its record is kept. Before it starts: the mode
is one of MODES, the root is writable and not full, no other run holds the root
(iostack.core.runlock: a second run waits), ReFrame knows the system, and every check the mode
must run loaded (ReFrame only warns about a check file that fails to import). After it:
the run's own report (`--report-file`, never the newest in the directory) has test cases
(ReFrame reports PASSED when none was selected, ReFrame issue #3599, and 4.10 has no
option against it) and ReFrame stored its session; else the report is kept for
`bin/iostack store-report`. The whole run, waiting included, ends within its mode's
wall-clock bound.

Before the checks, the health gate (as Oracle's stack checks its nodes before it gives them to
jobs [OCI-HPC-Stack]): where the system has nodes the per-node hardware check knows
(NodeHardwareCheck: disk, huge pages, NPS/SMT, the RDMA link; their Ansible facts), it runs on
every node first, in a session of its own. A node that is not as its facts say is drained from
the run's performance checks, one line each (`iostack: node2 is drained from the performance
checks: ...`): they get `--exclude` (IOSTACK_DRAINED_NODES, iostack_rfm.base), its other
checks still run there, and the gate's failure is the run's.

After a stored session, the history gate (iostack.regression.gates): each gated figure's last nights
against the nights before them in the results DB, since its reference was recorded; a
regression that persists fails the run (RC_REGRESSION) even when each night stayed inside
its band.

Exit codes: ReFrame's (1: a test failed), 2 a refused start, RC_NO_TESTS, RC_NOT_STORED,
RC_TIME_UP, RC_REGRESSION.
"""
from __future__ import annotations

import ast
import datetime
import hashlib
import os
import pathlib
import time
from typing import NamedTuple

from iostack.core import filesystems, paths, provenance, runlock
from iostack.core.errors import IostackError
from iostack.deployment import roots
from iostack.regression import gates, references, reframe, results
from iostack.site import facts, packages
from iostack.site.target import Target

RC_NO_TESTS = 3
RC_NOT_STORED = 4
RC_TIME_UP = 5
RC_REGRESSION = 6


class Mode(NamedTuple):
    #: the whole run's bound, waiting for another run included
    wall_clock_seconds: int
    #: check classes the mode must load (selected by the mode's tags on some partition)
    checks: frozenset[str]
    #: what set-up installs for its checks (system-packages.toml: `deploy`, `nightly`)
    packages: str = "nightly"


_NIGHTLY = frozenset({"BindingCheck", "CrossAarch64StackCheck", "FdbBitIdentityCheck", "FdbCrossVersionCheck",
                      "FdbThroughputCheck", "FdbWriterScalingCheck", "IO500Check",
                      "IorLayoutCheck", "MdtestScalingCheck", "MotorBikeStagingCheck",
                      "MultioBitIdentityCheck", "MultioHammerThroughputCheck",
                      "NetcdfOutputCheck", "NodeHardwareCheck", "OpenFOAMPitzDailyCheck",
                      "OpenIFSOutputCheck", "OpenifsCheck", "OpenifsIdealisedCheck",
                      "PitzDailyInterNodeCheck",
                      "StackSmokeCheck"})
#: The ReFrame modes of reframe-tests/iostack_rfm/config.py (same names; a test keeps the two
#: and the checks that exist in step): what each must load, and its wall-clock bound.
MODES = {
    # a release's regression before it becomes current (`bin/iostack deploy`): correctness
    # on a node set up for deploying only
    "deploy": Mode(4 * 3600, frozenset({"FdbBitIdentityCheck", "FdbCrossVersionCheck",
                                        "MultioBitIdentityCheck", "StackSmokeCheck"}),
                   packages="deploy"),
    "nightly": Mode(4 * 3600, _NIGHTLY),
    "weekly": Mode(24 * 3600, _NIGHTLY | {"FdbFieldSizeCheck", "HpcMotorbikeInterNodeCheck",
                                          "HpcMotorbikeIntraNodeCheck",
                                          "HpcMotorbikeStorageCheck",
                                          "NetcdfOutputScalingCheck"}),
}
WHERE_MODES = ("reframe-tests/iostack_rfm/config.py `modes` (their checks and bounds: "
               "lib/iostack/regression/nightly.py MODES)")


def spack_lock_sha256(target: Target) -> str:
    lock = target.lock
    return hashlib.sha256(lock.read_bytes()).hexdigest() if lock.is_file() else "none"


def session_extras(target: Target) -> dict[str, str]:
    return {"site": target.site, "commit": provenance.git_commit(),
            "spack_lock_sha256": spack_lock_sha256(target)}


def mode_of(name: str) -> Mode:
    if name not in MODES:
        raise IostackError(f"unknown mode {name!r}: modes are {', '.join(MODES)}, defined in "
                           f"{WHERE_MODES}")
    return MODES[name]


def _duration(seconds: float) -> str:
    return str(datetime.timedelta(seconds=round(seconds)))


def _no_baseline_hints(report: dict, site: str) -> list[str]:
    """One line per failed case whose reference is the no-baseline placeholder."""
    hints = []
    for tc in results.last_attempts(report).values():
        if tc.get("result") != "fail" or tc.get("fail_phase") != "performance":
            continue
        if any(references.is_no_baseline(pv.ref) for pv in results.perf_values(tc).values()):
            hints.append(f"  {tc['name']} @{tc['system']}:{tc['partition']}+{tc.get('environ')}: "
                         f"bin/iostack record-baseline --site {site} --system "
                         f"{tc['system']} --check {results.check_of(tc)}")
    return sorted(set(hints))


def history_regressions(report: dict, target: Target) -> list[str]:
    """One line per gated figure of tonight's cases whose last nights regressed against the
    nights before them (iostack.regression.gates.history_verdict), from the results DB."""
    system = target.reframe_system
    refs = target.settings.references
    wanted: dict[tuple, dict[str, tuple[bool, float]]] = {}
    for tc in results.last_attempts(report).values():
        if tc.get("system") != system or not tc.get("filename") or not tc.get("perfvalues"):
            continue
        section = references.load(references.references_file(tc["filename"], refs)).get(
            results.check_of(tc))
        if not section:
            continue
        thresholds = section.get("thresholds") or {}
        recorded = references.entries(section, f"{system}:{tc['partition']}",
                                      tc.get("reference_variant") or references.ANY_VARIANT,
                                      tc.get("environ"))
        measured = results.perf_values(tc)
        for var in references.gated_variables(section):
            if var in measured:
                case = (tc["name"], tc["partition"], tc.get("environ"))
                wanted.setdefault(case, {})[var] = (
                    thresholds[var].get("lower") is not None,
                    references.recorded_since(recorded.get(var)))
    if not wanted:
        return []
    sessions = results.stored_sessions(target)
    lines = []
    for case, variables in sorted(wanted.items()):
        for var, (lower_is_worse, since) in sorted(variables.items()):
            values = [v for t, v in results.series(sessions, system, case, var) if t >= since]
            found = gates.history_verdict(values, lower_is_worse)
            if found and found.regressed:
                lines.append(f"{case[0]} @{system}:{case[1]}+{case[2]} {var}: "
                             f"{found.describe()}")
    return lines


def preflight(target: Target, mode: str, env=None) -> None:
    """ReFrame knows the system and the mode, and every check the mode must run loads.
    (A check of the system's nodes, the health gate's, is looked for later.)"""
    site, system = target.site, target.reframe_system
    listing = reframe.list_checks(target, mode, env_extra=env)
    config = target.reframe_config.relative_to(paths.REPO)
    if "requested system" in listing.error:
        known = ", ".join(facts.reframe_systems(site))
        whose = f"site {site} has no ReFrame system {system!r}" if system == site else \
            f"ReFrame system {system!r} is not one of site {site}'s"
        raise IostackError(f"{whose}: {config} defines the systems sites/{site}.yaml lists "
                           f"({known}); nothing was run")
    if "invalid mode" in listing.error:
        raise IostackError(f"mode {mode!r} is not defined in {WHERE_MODES.split(' (')[0]}, "
                           "though lib/iostack/regression/nightly.py MODES has it; nothing "
                           "was run")
    if listing.rc != 0 or listing.error:
        raise IostackError("ReFrame refused to start: "
                           f"{listing.error or f'exit code {listing.rc}'}; nothing was run")
    missing = sorted(MODES[mode].checks - listing.checks)
    if missing:
        skipped = listing.skipped or reframe.load_warnings(target, mode, env_extra=env)
        why = "; ".join(skipped) or "no test of theirs has the mode's tags"
        raise IostackError(f"mode {mode} must run {', '.join(missing)}, which did not load "
                           f"({why}); the checks each mode must run are listed in "
                           "lib/iostack/regression/nightly.py MODES; nothing was run")


def verdict(outcome: reframe.Outcome, report_path: pathlib.Path, target: Target, mode: str,
            extra) -> int:
    """The run's exit code, with one line saying what is wrong when it is not ReFrame's."""
    site, system, state, db = target.site, target.reframe_system, target.state_dir, target.results_db
    if outcome.timed_out:
        print(f"iostack: error: mode {mode} ran out of its wall-clock bound "
              f"({_duration(MODES[mode].wall_clock_seconds)}, lib/iostack/regression/nightly.py MODES): "
              "ReFrame was interrupted and its jobs cancelled; the session is not stored")
        return RC_TIME_UP
    full = filesystems.full(state) or filesystems.full(db)
    report = results.read_report(report_path) if report_path.is_file() else None
    if report is None:
        if full:
            print(f"iostack: error: {full}: the run could not write its report "
                  f"{report_path}; free space there and run again")
            return outcome.rc or 1
        for note, what in (("report_failed", "could not write its report"),
                           ("error", "stopped")):
            if outcome.notes.get(note):
                print(f"iostack: error: ReFrame {what}: {outcome.notes[note]}")
                return outcome.rc or 1
    else:
        print(f"iostack: ReFrame report: {report_path}")
    if report is None or not report.get("session_info", {}).get("num_cases"):
        print(f"iostack: error: ReFrame ran no test case on system {system} (mode {mode}, "
              f"options {' '.join(extra) or 'none'}): it would report PASSED (ReFrame issue "
              "#3599); check the selection (-n/-t/-p) and the partitions' features")
        return outcome.rc or RC_NO_TESTS
    hints = _no_baseline_hints(report, site)
    if hints:
        print("iostack: these failed for want of a recorded baseline; record one from this "
              "run and commit reframe-tests/references/:\n" + "\n".join(hints))
    if full:
        print(f"iostack: error: {full}")
    uuid = report.get("session_info", {}).get("uuid")
    if uuid and results.is_stored(target, uuid):
        regressions = history_regressions(report, target)
        for line in regressions:
            print(f"iostack: error: regression: {line}")
        return outcome.rc or (1 if full else 0) or (RC_REGRESSION if regressions else 0)
    reason = outcome.notes.get("store_failed", "the results DB does not hold it")
    print(f"iostack: error: session {uuid} was NOT stored in the results DB "
          f"{db} ({reason}); its report is kept: once the DB is repaired "
          f"or moved aside, run `bin/iostack store-report --site {site} --system {system} "
          f"--root {target.root} {report_path}`")
    return outcome.rc or RC_NOT_STORED


#: the health gate's check, and how the nodes it drained reach the run's checks
GATE_CHECK = "NodeHardwareCheck"
DRAINED_ENV = "IOSTACK_DRAINED_NODES"


def gate_wanted(extra) -> bool:
    """A run gates its nodes unless it runs the gate's check itself (by name, or spread
    over the nodes with --distribute)."""
    args = [str(a) for a in extra]
    return not any(GATE_CHECK in a or a.startswith("--distribute") for a in args)


def _first_attempts_last(report: dict) -> dict[str, dict]:
    out = {}
    for attempt in report.get("runs", []):
        for tc in attempt.get("testcases", []):
            out[tc.get("unique_name") or tc["display_name"]] = tc
    return out


def drained_nodes(report: dict) -> dict[str, str]:
    """{node: why} of the nodes whose hardware check failed in a gate's report (its last
    attempt): the check's lines about that node, else ReFrame's reason."""
    out = {}
    for tc in _first_attempts_last(report).values():
        name = tc.get("display_name", "")
        if tc.get("result") != "fail" or "%.nid=" not in name:
            continue
        node = name.split("%.nid=")[1].split()[0]
        reason = str(tc.get("fail_reason") or "failed")
        listed = reason.split("sanity error: ", 1)[-1]
        try:
            lines = ast.literal_eval(listed)
        except (ValueError, SyntaxError):
            lines = None
        if isinstance(lines, list) and lines:
            reason = "; ".join(str(x).removeprefix(f"{node}: ") for x in lines)
        out[node] = reason
    return out


def health_gate(target: Target, mode: str, deadline: float, env: dict, extras: str,
                state: pathlib.Path, lock_fd) -> tuple[int, dict[str, str]] | None:
    """The hardware check on every node of the system: its verdict and the nodes it drains,
    each said in one line; None where the system has no node the check knows."""
    system = target.reframe_system
    listing = reframe.list_checks(target, mode, env_extra=env, select=["-n", GATE_CHECK],
                                  partitions=True)
    if GATE_CHECK not in listing.checks:
        return None
    print(f"iostack: health gate: {GATE_CHECK} on every node of {system} before the checks",
          flush=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    report_path = state / "reports" / f"run-report-{stamp}-{os.getpid()}-gate.json"
    gate = ["-n", GATE_CHECK, "--distribute=all"]
    outcome = reframe.reframe(target, mode=mode, deadline=deadline,
                              extra=["--session-extras", extras, "--report-file", report_path,
                                     *gate], env_extra=env, pass_fds=(lock_fd,))
    rc = verdict(outcome, report_path, target, mode, gate)
    report = results.read_report(report_path) if report_path.is_file() else None
    drained = drained_nodes(report) if report else {}
    for node, why in sorted(drained.items()):
        print(f"iostack: {node} is drained from the performance checks: {why}", flush=True)
    return rc, drained


def require_node_packages(mode: str, extra=()) -> None:
    """A mode's checks run what set-up installs for its purpose (Mode.packages): refuse
    before anything runs where this node lacks it, unless the run selects its checks."""
    purpose = mode_of(mode).packages
    selected = any(a in ("-n", "--name", "-x", "--exclude", "-t", "--tag") or
                   a.startswith(("--name=", "--exclude=", "--tag=")) for a in map(str, extra))
    missing = packages.missing_on_this_node(purpose)
    if missing and not selected:
        with_ = "" if purpose == "deploy" else f" --with {purpose}"
        raise IostackError(f"mode {mode}'s checks run {', '.join(missing)}, which this node "
                           f"lacks: `bin/iostack setup{with_}` installs them, or select checks "
                           "(-- -n CHECK), or deploy with --skip-regression")


def job_environment(target: Target) -> dict[str, str]:
    """What ReFrame's configuration needs beside the facts to submit this site's jobs: the
    account they charge (the target's, else the facts'). FactsError, one line, when the
    centre refuses jobs without one and there is none: before anything is submitted."""
    name = facts.load(target.site).slurm_account(target.account)
    return {ACCOUNT_ENV: name} if name else {}


#: how the account a run's jobs charge reaches ReFrame's configuration
ACCOUNT_ENV = "IOSTACK_ACCOUNT"


def run(target: Target, extra=(), mode="nightly") -> int:
    """The regression of the target's tree (its release, else its root) on its system."""
    deadline = time.monotonic() + mode_of(mode).wall_clock_seconds
    env = job_environment(target)
    state_dir = target.state_dir
    state = roots.require_writable(state_dir.parent, state_dir.name)
    # one run at a time on a deployment, whichever of its releases each tests
    shared = state if target.state else roots.require_writable(target.root, "reframe")
    require_node_packages(mode, extra)
    with runlock.hold(shared / "nightly.lock", deadline) as lock_fd:
        preflight(target, mode, env)
        extras = ",".join(f"{k}={v}" for k, v in session_extras(target).items())
        gate = health_gate(target, mode, deadline, env, extras, state,
                           lock_fd) if gate_wanted(extra) else None
        gate_rc = 0
        if gate is not None:
            gate_rc, drained = gate
            # the gate ran the hardware check on every node: not again
            extra = [*extra, "-x", GATE_CHECK]
            if drained:
                env = {**env, DRAINED_ENV: ",".join(sorted(drained))}
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        report_path = state / "reports" / f"run-report-{stamp}-{os.getpid()}.json"
        outcome = reframe.reframe(
            target, mode=mode, deadline=deadline,
            extra=["--session-extras", extras, "--report-file", report_path, *extra],
            env_extra=env, pass_fds=(lock_fd,))
        return verdict(outcome, report_path, target, mode, extra) or gate_rc
