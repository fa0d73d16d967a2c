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

Figures are judged on the node that made them (iostack.regression.references): on a node
without a baseline of its own, only the figures that transfer between nodes are, and the run
says so in one line, naming `record-baseline`. Gate 1's alarms on time figures need the next
night's confirmation: a case that failed only on figures outside their bands tonight, the
night before inside, is said in one line each (`iostack: unconfirmed: ...`) and does not
fail the run; the same figure outside on two nights running does (ReFrame's failure).

Exit codes: ReFrame's (1: a test failed), 2 a refused start, RC_NO_TESTS, RC_NOT_STORED,
RC_TIME_UP, RC_REGRESSION.
"""
from __future__ import annotations

import ast
import logging
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

log = logging.getLogger(__name__)

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


_NIGHTLY = frozenset({"BindingCheck", "CrossAarch64StackCheck", "DarshanProfileCheck",
                      "FdbBitIdentityCheck", "FdbCrossVersionCheck",
                      "FdbThroughputCheck", "FdbWriterScalingCheck", "IO500Check",
                      "IorLayoutCheck", "MdtestScalingCheck", "MotorBikeStagingCheck",
                      "MultioBitIdentityCheck", "MultioHammerThroughputCheck",
                      "NetcdfOutputCheck", "NodeHardwareCheck", "OpenFOAMPitzDailyCheck",
                      "OpenIFSOutputCheck", "OpenifsCheck", "OpenifsIdealisedCheck",
                      "OpenifsWorkCountsCheck",
                      "PitzDailyInterNodeCheck",
                      "StackSmokeCheck", "WorkCountsCheck"})
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


def _sections(report: dict, target: Target):
    """(test case, its check's references section) of tonight's cases on the system that
    have performance values and a references file."""
    system, refs = target.reframe_system, target.settings.references
    for tc in results.last_attempts(report).values():
        if tc.get("system") != system or not tc.get("filename") or not tc.get("perfvalues"):
            continue
        section = references.load(references.references_file(tc["filename"], refs)).get(
            results.check_of(tc))
        if section:
            yield tc, section


def nodes_without_baseline(report: dict, target: Target) -> dict[str, list[str]]:
    """{node: [checks]} of tonight's cases that ran on a node with no baseline of its own,
    on a partition another node recorded: only their figures that transfer were judged."""
    system = target.reframe_system
    out: dict[str, set[str]] = {}
    for tc, section in _sections(report, target):
        partition, environ = f"{system}:{tc['partition']}", tc.get("environ")
        node = tc.get("node_key") or None
        if node and references.recorded_anywhere(section, partition, environ) and \
                not references.has_baseline(section, partition, tc.get("reference_variant")
                                            or references.ANY_VARIANT, environ, node):
            out.setdefault(node, set()).add(results.check_of(tc))
    return {node: sorted(checks) for node, checks in out.items()}


def history_regressions(report: dict, target: Target,
                        sessions: list[dict] | None = None) -> list[str]:
    """One line per gated figure of tonight's cases whose last nights regressed against the
    nights before them (iostack.regression.gates.history_verdict), from the results DB: the
    nights of tonight's node, since the value it is judged by was recorded; an absolute
    figure only on a node with a value of its own."""
    system = target.reframe_system
    wanted: dict[tuple, dict[str, tuple[bool, float]]] = {}
    for tc, section in _sections(report, target):
        thresholds = section.get("thresholds") or {}
        node = tc.get("node_key") or None
        variant = tc.get("reference_variant") or references.ANY_VARIANT
        partition = f"{system}:{tc['partition']}"
        recorded = references.entries(section, partition, variant, tc.get("environ"), node)
        own = references.has_baseline(section, partition, variant, tc.get("environ"), node)
        measured = results.perf_values(tc)
        for var in references.gated_variables(section):
            if var in measured and (own or references.transfers(section, var)):
                case = (tc["name"], tc["partition"], tc.get("environ"), node)
                wanted.setdefault(case, {})[var] = (
                    thresholds[var].get("lower") is not None,
                    references.recorded_since(recorded.get(var)))
    if not wanted:
        return []
    sessions = results.stored_sessions(target) if sessions is None else sessions
    verdicts = {}
    for (*case_, node), variables in sorted(wanted.items(), key=lambda kv: str(kv[0])):
        case = tuple(case_)
        for var, (lower_is_worse, since) in sorted(variables.items()):
            values = [v for t, v in results.series(sessions, system, case, var, node)
                      if t >= since]
            found = gates.history_verdict(values, lower_is_worse)
            if found:
                verdicts[(case, var)] = found
    # tonight's figures as one family (Holm): one clean night in 20 with any history alarm
    return [f"{case[0]} @{system}:{case[1]}+{case[2]} {var}: {verdicts[(case, var)].describe()}"
            f" (Holm over {len(verdicts)} figures at {gates.FAMILY_ALPHA})"
            for case, var in sorted(gates.family_regressions(verdicts))]


def _alarms(tc: dict, section: dict) -> list[str]:
    """The figures a failed case missed its band on (not the no-baseline placeholder)."""
    return [var for var, pv in results.perf_values(tc).items()
            if pv.result == "fail" and not references.is_no_baseline(pv.ref)
            and var in references.gated_variables(section)]


def unconfirmed_alarms(report: dict, target: Target,
                       sessions: list[dict] | None = None) -> tuple[list[str], bool]:
    """Gate 1's alarms on time figures that the night before (on the same node) did not
    raise too: one line each, and whether they are all that failed tonight. A clean night
    falls outside a band with some small chance for each of the ~24 timed figures, so a
    nightly failing on any one of them alone fails one clean night in four or five
    (reframe-tests/README.md, "Gates"); a real regression stays, and the next night
    confirms it. Work counts (`deterministic: true`) fail at once."""
    system = target.reframe_system
    tonight = report.get("session_info", {}).get("uuid")
    failed = [tc for tc in results.last_attempts(report).values()
              if tc.get("result") not in ("pass", "skip")]
    if not failed:
        return [], False
    by_case = {(tc["name"], tc["partition"], tc.get("environ")): section
               for tc, section in _sections(report, target)}
    before = None
    lines, only_unconfirmed = [], True
    for tc in failed:
        section = by_case.get((tc["name"], tc["partition"], tc.get("environ"))) or {}
        alarms = _alarms(tc, section) if section and tc.get("system") == system else []
        failed_vars = [v for v, pv in results.perf_values(tc).items() if pv.result == "fail"]
        if (tc.get("fail_phase") != "performance" or not alarms or set(alarms) != set(failed_vars)
                or any(((section.get("thresholds") or {}).get(v) or {}).get("deterministic")
                       for v in alarms)):
            only_unconfirmed = False
            continue
        if before is None:
            stored = results.stored_sessions(target) if sessions is None else sessions
            before = [s for s in stored if s["session_info"].get("uuid") != tonight]
        node = tc.get("node_key") or None
        case = (tc["name"], system, tc["partition"], tc.get("environ"))
        last = next((results.last_attempts(s)[case] for s in reversed(before)
                     if case in results.last_attempts(s)
                     and (not node or results.last_attempts(s)[case].get("node_key") in (None, node))),
                    None)
        prior = results.perf_values(last) if last else {}
        for var in alarms:
            pv = results.perf_values(tc)[var]
            if var in prior and prior[var].result == "fail":
                only_unconfirmed = False    # two nights running: confirmed, ReFrame's failure
                continue
            lines.append(f"{tc['name']} @{system}:{tc['partition']}+{tc.get('environ')} {var}="
                         f"{pv.value:.4g} {pv.unit or ''} outside its band (reference "
                         f"{pv.ref:.4g}) tonight only: the nightly fails if the next night is "
                         "outside too")
    return lines, only_unconfirmed and bool(lines)


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


class Verdict(NamedTuple):
    """What a run concluded: its exit code, and what to tell whoever reads it, in order, as
    (kind, text): `error` (why it failed), `unconfirmed` (a time alarm that fails only when
    the next night confirms it), `note` (anything else worth a line). The CLI prints it."""
    rc: int
    findings: tuple[tuple[str, str], ...] = ()


def verdict(outcome: reframe.Outcome, report_path: pathlib.Path, target: Target, mode: str,
            extra) -> Verdict:
    """The run's exit code, with one line saying what is wrong when it is not ReFrame's."""
    site, system, state, db = target.site, target.reframe_system, target.state_dir, target.results_db
    said: list[tuple[str, str]] = []

    def done(rc: int) -> Verdict:
        return Verdict(rc, tuple(said))

    if outcome.timed_out:
        said.append(("error", f"mode {mode} ran out of its wall-clock bound "
                     f"({_duration(MODES[mode].wall_clock_seconds)}, lib/iostack/regression/nightly.py MODES): "
                     "ReFrame was interrupted and its jobs cancelled; the session is not stored"))
        return done(RC_TIME_UP)
    full = filesystems.full(state) or filesystems.full(db)
    report = results.read_report(report_path) if report_path.is_file() else None
    if report is None:
        if full:
            said.append(("error", f"{full}: the run could not write its report "
                         f"{report_path}; free space there and run again"))
            return done(outcome.rc or 1)
        for note, what in (("report_failed", "could not write its report"),
                           ("error", "stopped")):
            if outcome.notes.get(note):
                said.append(("error", f"ReFrame {what}: {outcome.notes[note]}"))
                return done(outcome.rc or 1)
    else:
        said.append(("note", f"ReFrame report: {report_path}"))
    if report is None or not report.get("session_info", {}).get("num_cases"):
        said.append(("error", f"ReFrame ran no test case on system {system} (mode {mode}, "
                     f"options {' '.join(extra) or 'none'}): it would report PASSED (ReFrame issue "
                     "#3599); check the selection (-n/-t/-p) and the partitions' features"))
        return done(outcome.rc or RC_NO_TESTS)
    hints = _no_baseline_hints(report, site)
    if hints:
        said.append(("note", "these failed for want of a recorded baseline; record one from this "
                     "run and commit reframe-tests/references/:\n" + "\n".join(hints)))
    if full:
        said.append(("error", full))
    for node, checks in sorted(nodes_without_baseline(report, target).items()):
        said.append(("note", f"node {node} has no baseline of its own ({', '.join(checks)}): only "
                     "figures that transfer between nodes were judged; after a passing nightly, "
                     f"`bin/iostack record-baseline --site {site} --system {system}` records its own"))
    uuid = report.get("session_info", {}).get("uuid")
    if uuid and results.is_stored(target, uuid):
        rc = outcome.rc
        if rc:
            unconfirmed, only = unconfirmed_alarms(report, target)
            said.extend(("unconfirmed", line) for line in unconfirmed)
            rc = 0 if only else rc
        regressions = history_regressions(report, target)
        said.extend(("error", f"regression: {line}") for line in regressions)
        return done(rc or (1 if full else 0) or (RC_REGRESSION if regressions else 0))
    reason = outcome.notes.get("store_failed", "the results DB does not hold it")
    said.append(("error", f"session {uuid} was NOT stored in the results DB "
                 f"{db} ({reason}); its report is kept: once the DB is repaired "
                 f"or moved aside, run `bin/iostack store-report --site {site} --system {system} "
                 f"--root {target.root} {report_path}`"))
    return done(outcome.rc or RC_NOT_STORED)


def log_findings(v: Verdict) -> None:
    """A verdict said as the run goes (the health gate's, before the checks run)."""
    for kind, text in v.findings:
        log.info(text if kind == "note" else f"{kind}: {text}")


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
    log.info(f"health gate: {GATE_CHECK} on every node of {system} before the checks")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    report_path = state / "reports" / f"run-report-{stamp}-{os.getpid()}-gate.json"
    gate = ["-n", GATE_CHECK, "--distribute=all"]
    outcome = reframe.reframe(target, mode=mode, deadline=deadline,
                              extra=["--session-extras", extras, "--report-file", report_path,
                                     *gate], env_extra=env, pass_fds=(lock_fd,))
    said = verdict(outcome, report_path, target, mode, gate)
    log_findings(said)
    report = results.read_report(report_path) if report_path.is_file() else None
    drained = drained_nodes(report) if report else {}
    for node, why in sorted(drained.items()):
        log.info(f"{node} is drained from the performance checks: {why}")
    return said.rc, drained


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


def run(target: Target, extra=(), mode="nightly") -> Verdict:
    """The regression of the target's tree (its release, else its root) on its system: its
    verdict, which the caller prints."""
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
        found = verdict(outcome, report_path, target, mode, extra)
        return found._replace(rc=found.rc or gate_rc)
