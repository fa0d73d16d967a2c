"""bin/iostack record-baseline: write a system's stored performance values into the checks'
references (reframe-tests/references/<check module>.yaml), each with its provenance.

    bin/iostack nightly --site cray-ex                      # fails: no baseline yet
    bin/iostack record-baseline --site cray-ex              # from the latest stored session
    git diff reframe-tests/references/ && git commit ...    # review, then commit

Values come from the latest session in the results DB that ran on the system (or
--session UUID, repeatable: the median of the named sessions; or the median over the last
--sessions N), each test case's last attempt.
A session that failed anything is refused, whatever is being recorded: its numbers are no
baseline (a case whose only failure is the no-baseline placeholder, as on a new system,
is no failure here).

Each value is keyed by the node its job ran on (`@node`, the test case's `node_key`:
iostack.regression.node): an absolute figure judges only that node. A session that ran on
uncommitted code (its commit ends in `-dirty`) is refused, in one line: a reference must
name code someone can check out.

Bands (iostack.regression.gates): a gated variable's band is BAND_SIGMAS robust standard deviations
of the recorded nights' values (record 5 or more: `--sessions 5`), never narrower than its
threshold in the file (the floor); from fewer than 3 nights the band comes from the
within-run spread (`<variable>_spread`), widened. Each entry keeps the spread it was made
from (`spread:`). --lower/--upper set a band by hand instead (say why in the commit).
"""
from __future__ import annotations

import logging
import datetime
import pathlib
import statistics
from collections.abc import Sequence

from iostack.core.errors import Failed
from iostack.regression import gates, references, results
from iostack.site.target import Target

log = logging.getLogger(__name__)


def _only_without_baseline(tc: dict) -> bool:
    """A case whose only failure is a reference no value meets (no baseline yet)."""
    failed = [pv for pv in results.perf_values(tc).values() if pv.result == "fail"]
    return (tc.get("fail_phase") == "performance" and bool(failed)
            and all(references.is_no_baseline(pv.ref) for pv in failed))


def failures(session: dict, system: str) -> list[str]:
    """What failed in a session on `system`, a line each (a case without a baseline, and one
    skipped where it cannot run, aside)."""
    return sorted(f"{tc['name']} @{tc['system']}:{tc['partition']}+{tc.get('environ')}: "
                  f"{tc.get('fail_phase') or 'failed'}"
                  for tc in results.last_attempts(session).values()
                  if tc["system"] == system and tc.get("result") not in ("pass", "skip")
                  and not _only_without_baseline(tc))


def choose_sessions(sessions: list[dict], system: str, uuids: Sequence[str] = (),
                    count: int = 1, checks: Sequence[str] = ()) -> list[dict]:
    """The sessions named by `uuids`, or the last `count` sessions with values from `system`
    (of `checks`, if given: a campaign's nights run one figure each); refused if any of
    them failed anything."""
    if uuids:
        chosen = [s for s in sessions if s["session_info"].get("uuid") in uuids]
        missing = sorted(set(uuids) - {s["session_info"].get("uuid") for s in chosen})
        if missing:
            raise Failed(f"no stored session {', '.join(missing)}")
    else:
        chosen = [s for s in sessions
                  if any(tc["system"] == system and tc.get("perfvalues")
                         and (not checks or results.check_of(tc) in checks)
                         for tc in results.last_attempts(s).values())][-count:]
    if not chosen:
        raise Failed(f"no stored session has performance values from system {system}: "
                     f"run `bin/iostack nightly --system {system}` first")
    for s in chosen:
        failed = failures(s, system)
        if failed:
            raise Failed(f"session {s['session_info'].get('uuid')} failed on {system}, so none "
                         "of its values is a baseline: " + "; ".join(failed[:5])
                         + (f"; and {len(failed) - 5} more" if len(failed) > 5 else "")
                         + " (fix it and run the nightly again, or name passing sessions)")
    dirty = [s["session_info"].get("uuid") for s in chosen
             if str(s["session_info"].get("commit", "")).endswith("-dirty")]
    if dirty:
        raise Failed(f"session(s) {', '.join(map(str, dirty))} ran on uncommitted code (commit "
                     "`...-dirty`), which no checkout reproduces: commit, run the nightly "
                     "again and record from its sessions")
    return chosen


def _utc(unix) -> str:
    if not unix:
        return "unknown"
    return datetime.datetime.fromtimestamp(unix, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def provenance(sessions: list[dict]) -> dict:
    """Where recorded values come from: the (last) session's time, commit, stack, host."""
    infos = [s["session_info"] for s in sessions]
    last = infos[-1]
    prov = {
        "recorded": _utc(last.get("time_end_unix") or last.get("time_start_unix")),
        "commit": last.get("commit", "unknown"),
        "spack_lock_sha256": last.get("spack_lock_sha256", "unknown"),
        "session": last.get("uuid", "unknown"),
        "host": last.get("hostname", "unknown"),
    }
    if len(infos) > 1:
        prov["median_of_sessions"] = [i.get("uuid", "unknown") for i in infos]
        prov["since"] = _utc(infos[0].get("time_start_unix"))
        commits = sorted({i.get("commit", "unknown") for i in infos})
        locks = sorted({i.get("spack_lock_sha256", "unknown") for i in infos})
        if len(commits) > 1:
            prov["commits"] = commits
        if len(locks) > 1:
            prov["spack_lock_sha256s"] = locks
    return prov


def record(sessions: list[dict], system: str, checks=(), refs_dir: pathlib.Path | None = None,
           lower: float | None = None, upper: float | None = None) -> dict[pathlib.Path, int]:
    """Write the sessions' values for `system` (the median where several sessions have
    one) into the references files; returns {file: number of values written}."""
    refs_dir = refs_dir or references.REFERENCES_DIR
    # (file, check, partition, variant, var) -> each session's value, unit, the sessions
    values: dict[tuple, list] = {}
    units: dict[tuple, str | None] = {}
    sources: dict[tuple, list] = {}
    # the CPU frequency each value's job ran at (the mixin's cpu_freq_requested)
    freqs: dict[tuple, set[str]] = {}
    without_file = set()
    without_node = set()
    # each node's identity, as its jobs recorded it
    identities: dict[str, dict] = {}
    for session in sessions:
        for tc in results.last_attempts(session).values():
            check = results.check_of(tc)
            usable = tc.get("result") == "pass" or _only_without_baseline(tc)
            if tc["system"] != system or (checks and check not in checks) or not usable:
                continue
            path = references.references_file(tc["filename"], refs_dir)
            if not path.is_file():
                if check not in without_file:
                    log.info(f"{check}: no {path}, its check keeps no references; skipped")
                    without_file.add(check)
                continue
            node = tc.get("node_key")
            if not node:
                if check not in without_node:
                    log.info(f"{check}: its results name no node (not an iostack check, "
                          "or stored before references were keyed by node); skipped")
                    without_node.add(check)
                continue
            identities[node] = tc.get("node_identity") or {}
            variant = tc.get("reference_variant") or references.ANY_VARIANT
            # keyed by the environment it ran in (Debian's FDB is not the release's) and the
            # node (an absolute figure judges only the node that made it)
            partition = references.key(f"{tc['system']}:{tc['partition']}", tc.get("environ"),
                                       node)
            for var, pv in results.perf_values(tc).items():
                if isinstance(pv.value, (int, float)):
                    k = (path, check, partition, variant, var)
                    values.setdefault(k, []).append(float(pv.value))
                    units[k] = pv.unit
                    sources.setdefault(k, []).append(session)
                    freqs.setdefault(k, set()).add(str(tc.get("cpu_freq_requested") or ""))
    files: dict[pathlib.Path, dict] = {}
    written: dict[pathlib.Path, int] = {}
    for (path, check, partition, variant, var), vals in sorted(values.items()):
        data = files.setdefault(path, references.load(path))
        section = data.setdefault(check, {})
        bounds: dict[str, float | None] = {}
        spread = None
        threshold = (section.get("thresholds") or {}).get(var) or {}
        if var in references.gated_variables(section):
            within = values.get((path, check, partition, variant, var + gates.SPREAD_SUFFIX), [])
            side = "lower" if threshold.get("lower") is not None else "upper"
            measured = gates.band(vals, within, floor=threshold[side],
                                  lower_is_worse=side == "lower")
            bounds = {"lower": -measured.width} if side == "lower" else {"upper": measured.width}
            spread = measured.as_yaml()
            if lower is not None or upper is not None:
                bounds = {"lower": -abs(lower) if lower is not None else threshold.get("lower"),
                          "upper": abs(upper) if upper is not None else threshold.get("upper")}
                spread["band_from"] = "set by hand (--lower/--upper)"
        # each value's provenance names the sessions it is the median of (a campaign's
        # nights run one figure each)
        prov = provenance(sources[(path, check, partition, variant, var)])
        ran_at = freqs[(path, check, partition, variant, var)]
        if len(ran_at) > 1:
            raise Failed(f"{check} {partition} {var}: the sessions ran at different CPU "
                         f"frequencies ({', '.join(sorted(f or 'default' for f in ran_at))}); "
                         "record from sessions of one frequency (--session)")
        (freq,) = ran_at
        if freq.isdigit():
            prov["cpu_freq_khz"] = int(freq)
        prov["node"] = identities.get(references.node_of(partition) or "", {})
        references.record(section, partition, variant, var, statistics.median(vals),
                          units[(path, check, partition, variant, var)], prov, spread=spread,
                          **bounds)
        written[path] = written.get(path, 0) + 1
    for path, data in files.items():
        errors = references.validate(data)
        if errors:
            raise Failed(f"{path}: refusing to write invalid references:\n  " + "\n  ".join(errors))
        references.dump(path, data)
    return written


def main(target: Target, checks=(), session_uuids=(), refs_dir=None, lower=None, upper=None,
         count: int = 1) -> int:
    """Record the chosen sessions' values into `refs_dir` (default the settings')."""
    system = target.reframe_system
    refs_dir = refs_dir or target.settings.references
    sessions = choose_sessions(results.stored_sessions(target), system, session_uuids,
                               count, checks)
    names = [s["session_info"].get("uuid", "?") for s in sessions]
    uuids = ", ".join(names) if len(names) <= 3 else \
        f"{len(names)} sessions, {names[0]} ... {names[-1]}"
    written = record(sessions, system, checks, refs_dir, lower, upper)
    if not written:
        raise Failed(f"session(s) {uuids} have no values to record for system {system}"
                     f"{' and checks ' + ', '.join(checks) if checks else ''}")
    for path, n in sorted(written.items()):
        log.info(f"{path}: {n} value(s) recorded from session(s) {uuids} ({system})")
    log.info("review with `git diff reframe-tests/references/` and commit")
    return 0
