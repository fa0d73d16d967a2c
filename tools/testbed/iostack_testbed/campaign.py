"""The nightly's sensitivity, measured with real slowdowns (reframe-tests/README.md, "Gates").

Runs the gated figures' checks on a deployed site as the nightly does (`bin/iostack
nightly`), clean or slowed by a mechanism a site really meets, one "night" at a time, and
replays the gates on the nights: what each catches and how often a clean night fails.

    iostack-testbed campaign run --root deploy/local --out campaign --nights 3
    iostack-testbed campaign run --root deploy/local --out campaign --nights 2 \\
        --slowdown cpu:0.15            # CPU quota: (1 - 0.15) of the CPUs a figure uses
    iostack-testbed campaign run ... --slowdown blkio:0.15   # scratch disk writes
    iostack-testbed campaign run ... --figures fdb \\
        --slowdown fdb-env:FDB_DIRECT_WRITE_SIZE=0     # FDB configured to do more per field
    iostack-testbed campaign analyse campaign [--series tests/data/campaign/x.json]
    iostack-testbed campaign sessions campaign    # the clean nights, for record-baseline

Slowdowns (none changes a measured number; each slows what is measured):
- cpu:F     cgroup v1 cpu controller: cpu.cfs_quota_us = (1 - F) x the CPUs the figure's
            workload runs on x cpu.cfs_period_us (FDB's writer and pitzDaily's serial
            solver: 1; the MPI figures: their 2 ranks);
- blkio:F   cgroup v1 blkio: blkio.throttle.write_bps_device on the scratch device at
            (1 - F) x its direct-write rate, measured first (`--disk-bps` to give it);
            it throttles direct and synchronous writes, which is what the gated I/O
            figures write (IOR --posix.odirect, FDB's fdatasync, NetCDF --sync step);
- fdb-env:NAME=VALUE  the release's FDB with a run-time setting that makes it do more work
            per field (FDB_DIRECT_WRITE_SIZE=0: every field copied through FDB's stdio
            buffer, as before the recipe's direct-write patch).

Every night's processes (ReFrame, its jobs) run in the cgroup; each figure's checks run as
a night of their own. Sessions go to the campaign's own results DB (<out>/results.db), so
the deployment's history never sees a slowed night. <out>/nights.jsonl has one line per
night and figure: the slowdown, the session, the gated values. `analyse` replays the gates
(iostack.regression.gates) on them: each clean night against the other clean nights (leave one out),
each slowed night against all clean ones; and the history test on 3 slowed nights after
the clean ones. Needs root (cgroups).
"""
from __future__ import annotations

import argparse
import datetime
import functools
import itertools
import json
import os
import pathlib
import random
import signal
import statistics
import subprocess
import sys
import time
from typing import NamedTuple

from iostack.core import paths, process
from iostack.regression import gates, references, results

REPO = paths.REPO

CGROUP = pathlib.Path("/sys/fs/cgroup")


# What the nightly gates, per figure: the checks that measure it (ReFrame -n, in the
# nightly mode: its variants), the CPUs its workload runs on, and whether it times FDB (an
# fdb-env slowdown applies).
class Figure(NamedTuple):
    checks: list[str]
    cpus: int
    fdb: bool = False


FIGURES = {
    "fdb": Figure(["FdbThroughputCheck"], cpus=1, fdb=True),
    "fdb-scaling": Figure(["FdbWriterScalingCheck"], cpus=2, fdb=True),
    "ior": Figure(["IorLayoutCheck"], cpus=2),
    "mdtest": Figure(["MdtestScalingCheck"], cpus=2),
    "io500": Figure(["IO500Check"], cpus=2),
    "netcdf": Figure(["NetcdfOutputCheck"], cpus=2),
    "pitzdaily": Figure(["OpenFOAMPitzDailyCheck"], cpus=1),
}


def check_of(name: str) -> str:
    return name.split("%")[0]


@functools.cache
def gated(check: str) -> dict[str, bool]:
    """{gated variable: lower is worse} of a check class, from its references file."""
    for path in sorted(references.REFERENCES_DIR.glob("*.yaml")):
        section = references.load(path).get(check)
        if section:
            t = section.get("thresholds") or {}
            return {v: t[v].get("lower") is not None for v in references.gated_variables(section)}
    return {}


# -- slowdowns ---------------------------------------------------------------------------

def block_device(path: pathlib.Path) -> str:
    """major:minor of the disk under `path` (a partition's disk: blk-throttle is per disk)."""
    dev = os.stat(path).st_dev
    sysfs = pathlib.Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if (sysfs / "partition").exists():
        return (sysfs.resolve().parent / "dev").read_text().strip()
    return f"{os.major(dev)}:{os.minor(dev)}"


def direct_write_bps(where: pathlib.Path, mib: int = 256) -> float:
    """The scratch disk's direct-write rate now (dd oflag=direct), bytes/s."""
    probe = where / f".campaign-probe-{os.getpid()}"
    start = time.monotonic()
    process.run(["dd", "if=/dev/zero", f"of={probe}", "bs=1M", f"count={mib}",
                 "oflag=direct", "status=none"])
    seconds = time.monotonic() - start
    probe.unlink()
    return mib * 2**20 / seconds


class Cgroup:
    """A cgroup v1 under `controller` that this campaign's nights run in."""

    def __init__(self, controller: str, settings: dict[str, str]):
        self.dir = CGROUP / controller / f"iostack-campaign-{os.getpid()}"
        self.dir.mkdir(exist_ok=True)
        for name, value in settings.items():
            (self.dir / name).write_text(value)

    def join(self):
        """In the child, before exec: this process (and what it starts) in the group."""
        (self.dir / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self):
        try:
            self.dir.rmdir()
        except OSError as e:
            print(f"campaign: note: {self.dir} not removed ({e}); processes left in it?",
                  file=sys.stderr)


def slowdown_groups(slowdown: str, figure: str, root: pathlib.Path, disk_bps: float | None):
    """The cgroups a night of `figure` runs in, and what they set."""
    kind, _, arg = slowdown.partition(":")
    if kind == "clean" or kind == "fdb-env":
        return [], {}
    fraction = float(arg)
    if kind == "cpu":
        cpus = FIGURES[figure].cpus
        period = 100000
        quota = int(round((1 - fraction) * cpus * period))
        return [Cgroup("cpu", {"cpu.cfs_period_us": str(period),
                               "cpu.cfs_quota_us": str(quota)})], \
            {"cpu.cfs_quota_us": quota, "cpu.cfs_period_us": period, "cpus": cpus}
    if kind == "blkio":
        device = block_device(root)
        rate = disk_bps or direct_write_bps(root)
        limit = int((1 - fraction) * rate)
        return [Cgroup("blkio", {"blkio.throttle.write_bps_device": f"{device} {limit}"})], \
            {"device": device, "measured_write_bps": int(rate), "write_bps_device": limit}
    raise SystemExit(f"campaign: error: unknown slowdown {slowdown!r}")


# -- nights ------------------------------------------------------------------------------

def values_of(report: dict) -> dict[str, float]:
    """The gated values (and their spreads) of a run report: {'case|var': value}."""
    out = {}
    for tc in results.last_attempts(report).values():
        wanted = gated(results.check_of(tc))
        measured = results.perf_values(tc)
        for var in wanted:
            for name in (var, var + gates.SPREAD_SUFFIX):
                pv = measured.get(name)
                if pv is not None and isinstance(pv.value, (int, float)):
                    out[f"{tc['name']} @{tc['partition']}+{tc.get('environ')}|{name}"] = pv.value
    return out


def night(root: pathlib.Path, out: pathlib.Path, figure: str, slowdown: str,
          disk_bps: float | None) -> dict:
    groups, settings = slowdown_groups(slowdown, figure, root, disk_bps)
    env = {"RFM_SQLITE_DB_FILE": str(out / "results.db")}
    # no retry: a night's figure is its one run (the nightly retries a failed case once, and
    # a slowed night fails its references by design)
    extra = ["--max-retries=0"]
    for check in FIGURES[figure].checks:
        extra += ["-n", check]
    if slowdown.startswith("fdb-env:"):
        # a run-time setting of the release's own FDB, in the environment the nightly's jobs
        # inherit (local scheduler): e.g. FDB_DIRECT_WRITE_SIZE=0 copies every field through
        # FDB's stdio buffer again, the work the recipe's direct-write patch removed
        name, _, value = slowdown.split(":", 1)[1].partition("=")
        env[name] = value
        settings = {name: value}
    cmd = [str(REPO / "bin" / "iostack"), "nightly", "--site", "local", "--root", str(root),
           "--", *extra]
    started = time.time()
    log = out / "logs" / f"{datetime.datetime.now():%Y%m%dT%H%M%S}-{figure}-{slowdown.replace(':', '_').replace('/', '_')}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"campaign: {figure} {slowdown} {settings or ''}: {' '.join(cmd)}", flush=True)

    def enter():
        for group in groups:
            group.join()

    with open(log, "w") as f:
        rc = process.start(cmd, env_extra=env, stdout=f, stderr=subprocess.STDOUT,
                           preexec_fn=enter).wait()
    for group in groups:
        group.remove()
    text = log.read_text()
    report_line = [line for line in text.splitlines() if line.startswith("iostack: ReFrame report: ")]
    report = results.read_report(pathlib.Path(report_line[-1].split(": ", 2)[2])) \
        if report_line else {}
    failed = sorted(tc["name"] for tc in results.last_attempts(report).values()
                    if tc.get("result") != "pass" and tc.get("fail_phase") != "performance")
    record = {"figure": figure, "slowdown": slowdown, "settings": settings, "rc": rc,
              "started": started, "seconds": round(time.time() - started),
              "session": report.get("session_info", {}).get("uuid"), "log": str(log),
              "sanity_failed": failed, "values": values_of(report)}
    with open(out / "nights.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
    print(f"campaign: {figure} {slowdown}: rc {rc}, {record['seconds']} s, "
          f"{len(record['values'])} values{', FAILED ' + ', '.join(failed) if failed else ''}",
          flush=True)
    return record


def cmd_run(args) -> int:
    if os.geteuid() != 0 and args.slowdown not in ("clean",) and \
            not args.slowdown.startswith("fdb-env:"):
        raise SystemExit("campaign: error: cgroups need root")
    root = pathlib.Path(args.root).resolve()
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    figures = args.figures.split(",") if args.figures else list(FIGURES)
    for figure in figures:
        if figure not in FIGURES:
            raise SystemExit(f"campaign: error: unknown figure {figure!r} ({', '.join(FIGURES)})")
    for _ in range(args.nights):
        for figure in figures:
            if args.slowdown.startswith("fdb-env:") and not FIGURES[figure].fdb:
                continue
            night(root, out, figure, args.slowdown, args.disk_bps)
    return 0


# -- analysis ----------------------------------------------------------------------------

def load_nights(out: pathlib.Path) -> list[dict]:
    return [json.loads(line) for line in (out / "nights.jsonl").read_text().splitlines()
            if line.strip()]


def series(nights: list[dict]) -> dict:
    """{figure: {'case|var': {slowdown: [values, in night order]}}}, gated values of nights
    whose checks passed their sanity."""
    out: dict = {}
    for n in nights:
        if n["sanity_failed"]:
            continue
        for key, value in n["values"].items():
            if key.endswith(gates.SPREAD_SUFFIX):
                continue
            out.setdefault(n["figure"], {}).setdefault(key, {}).setdefault(
                n["slowdown"], []).append(value)
    return out


def spreads(nights: list[dict]) -> dict:
    """{'case|var': [within-run spreads of the clean nights]}."""
    out: dict = {}
    for n in nights:
        if n["slowdown"] == "clean" and not n["sanity_failed"]:
            for key, value in n["values"].items():
                if key.endswith(gates.SPREAD_SUFFIX):
                    out.setdefault(key[:-len(gates.SPREAD_SUFFIX)], []).append(value)
    return out


def lower_is_worse(key: str) -> bool:
    case, var = key.split("|")
    return gated(check_of(case.split()[0]))[var]


@functools.cache
def floor_of(key: str) -> float:
    case, var = key.split("|")
    check = check_of(case.split()[0])
    for path in sorted(references.REFERENCES_DIR.glob("*.yaml")):
        section = references.load(path).get(check)
        if section:
            t = section["thresholds"][var]
            return abs(t.get("lower") if t.get("lower") is not None else t.get("upper"))
    return 0.0


def tripped(value: float, reference: list[float], within: list[float], floor: float,
            low_bad: bool) -> bool:
    """Gate 1 as ReFrame applies it: outside the band record-baseline makes from `reference`."""
    ref = statistics.median(reference)
    band = gates.band(reference, within, floor=floor, lower_is_worse=low_bad).width
    return value < ref * (1 - band) if low_bad else value > ref * (1 + band)


def slowed(value: float, fraction: float, low_bad: bool) -> float:
    """`value` on a machine `fraction` slower for it: a rate times (1 - f), a time or a cost
    divided by it (cpu:F's quota is the same (1 - F))."""
    return value * (1 - fraction) if low_bad else value / (1 - fraction)


def smallest_caught(clean: list[float], within: list[float], floor: float, low_bad: bool,
                    share: float = 0.95) -> float | None:
    """The smallest slowdown of the figure itself (in steps of 1%) that gate 1 catches on at
    least `share` of the clean nights, each slowed by it and judged against the band of the
    others: the nights' own noise, shifted (None: fewer than 3 clean nights)."""
    if len(clean) < 3:
        return None
    for step in range(1, 96):
        fraction = step / 100
        caught = sum(tripped(slowed(v, fraction, low_bad), clean[:i] + clean[i + 1:], within,
                             floor, low_bad) for i, v in enumerate(clean))
        if caught >= share * len(clean):
            return fraction
    return None


def smallest_caught_history(clean: list[float], low_bad: bool, share: float = 0.95,
                            samples: int = 100) -> float | None:
    """The same for gate 3 (the history test): the smallest slowdown at which at least
    `share` of 3-night windows of clean nights, slowed by it and following the other clean
    nights, are called a regression (`samples` windows, the same ones at every size; None:
    too few nights)."""
    recent = gates.RECENT_NIGHTS
    if len(clean) < recent + gates.MIN_HISTORY:
        return None
    windows = list(itertools.combinations(range(len(clean)), recent))
    windows = random.Random(0).sample(windows, min(samples, len(windows)))
    for step in range(1, 96):
        fraction = step / 100
        caught = 0
        for window in windows:
            others = [v for i, v in enumerate(clean) if i not in window]
            verdict = gates.history_verdict(
                others + [slowed(clean[i], fraction, low_bad) for i in window], low_bad)
            caught += bool(verdict and verdict.regressed)
        if caught >= share * len(windows):
            return fraction
    return None


def analyse(nights: list[dict]) -> list[dict]:
    """One row per gated value and slowdown: nights, caught, false alarms."""
    rows = []
    within_all = spreads(nights)
    for figure, keys in sorted(series(nights).items()):
        for key, by_slowdown in sorted(keys.items()):
            clean = by_slowdown.get("clean", [])
            low_bad = lower_is_worse(key)
            floor = floor_of(key)
            within = within_all.get(key, [])
            # clean nights, each against the others (leave one out)
            alarms = sum(tripped(v, clean[:i] + clean[i + 1:], within, floor, low_bad)
                         for i, v in enumerate(clean)) if len(clean) > 1 else None
            band = gates.band(clean, within, floor=floor, lower_is_worse=low_bad) if clean else None
            rows.append({"figure": figure, "value": key, "slowdown": "clean",
                         "nights": len(clean), "tripped": alarms,
                         "median": statistics.median(clean) if clean else None,
                         "band": band.width if band else None,
                         "band_from": band.source if band else None,
                         "smallest_caught": smallest_caught(clean, within, floor, low_bad),
                         "smallest_caught_confirmed": smallest_caught_confirmed(
                             clean, within, floor, low_bad),
                         "smallest_caught_history": smallest_caught_history(clean, low_bad)})
            for slowdown, values in sorted(by_slowdown.items()):
                if slowdown == "clean" or not clean:
                    continue
                caught = sum(tripped(v, clean, within, floor, low_bad) for v in values)
                history = gates.history_verdict(clean + values[:gates.RECENT_NIGHTS], low_bad,
                                                ) if len(values) >= gates.RECENT_NIGHTS else None
                rows.append({"figure": figure, "value": key, "slowdown": slowdown,
                             "nights": len(values), "tripped": caught,
                             "median": statistics.median(values),
                             "change": statistics.median(values) / statistics.median(clean) - 1,
                             "history": None if history is None else history.regressed})
    return rows


def _clean_by_figure(nights: list[dict]) -> tuple[dict, int]:
    clean = [n for n in nights if n["slowdown"] == "clean" and not n["sanity_failed"]]
    by_figure: dict = {}
    for n in clean:
        by_figure.setdefault(n["figure"], []).append(n)
    return by_figure, min((len(v) for v in by_figure.values()), default=0)


def alarms_by_round(nights: list[dict]) -> tuple[dict[str, list[bool]], int]:
    """{gated value: [gate 1 tripped on the i-th clean night, against the band of the
    others]} and the number of rounds (the i-th clean night of every figure together: the
    campaign runs the figures one after the other)."""
    by_figure, rounds = _clean_by_figure(nights)
    within_all = spreads(nights)
    out = {}
    for figure_nights in by_figure.values():
        keys = {k for n in figure_nights for k in n["values"] if not k.endswith(gates.SPREAD_SUFFIX)}
        for key in sorted(keys):
            values = [n["values"].get(key) for n in figure_nights]
            low_bad = lower_is_worse(key)
            trips = []
            for i, value in enumerate(values[:rounds]):
                others = [v for j, v in enumerate(values) if j != i and v is not None]
                trips.append(value is not None and len(others) > 1 and tripped(
                    value, others, within_all.get(key, []), floor_of(key), low_bad))
            out[key] = trips
    return out, rounds


def rounds_with_alarms(nights: list[dict], confirm: bool = False) -> tuple[int, int]:
    """Clean "nights" of the whole nightly (alarms_by_round). Returns (nights with at least
    one gate-1 alarm among all gated values, nights): what one try of every check would
    fail, with no retry. `confirm`: an alarm counts only when the night before raised it on
    the same value too (the nightly's confirmation of time-only alarms), so the first night
    cannot alarm."""
    trips, rounds = alarms_by_round(nights)
    alarmed = {i for t in trips.values() for i in range(rounds)
               if t[i] and (not confirm or (i > 0 and t[i - 1]))}
    return len(alarmed), rounds


def history_false_alarms(nights: list[dict], family: bool = False) -> tuple[int, int]:
    """Gate 3 on the clean nights in their order: (rounds whose last 3 nights some gated
    value's history test calls a regression, rounds the test can judge). `family`: the
    round's values judged together, Holm-Bonferroni at gates.FAMILY_ALPHA (the nightly's
    rule), not each at gates.ALPHA."""
    by_figure, rounds = _clean_by_figure(nights)
    judged = range(gates.MIN_HISTORY + gates.RECENT_NIGHTS, rounds + 1)
    verdicts: dict[int, dict] = {end: {} for end in judged}
    for figure_nights in by_figure.values():
        keys = {k for n in figure_nights for k in n["values"] if not k.endswith(gates.SPREAD_SUFFIX)}
        for key in keys:
            values = [n["values"].get(key) for n in figure_nights][:rounds]
            for end in judged:
                found = gates.history_verdict([v for v in values[:end] if v is not None],
                                              lower_is_worse(key))
                if found:
                    verdicts[end][key] = found
    alarmed = {end for end, found in verdicts.items()
               if (gates.family_regressions(found) if family
                   else [k for k, v in found.items() if v.regressed])}
    return len(alarmed), len(judged)


def whole_nightly_false_alarms(nights: list[dict], nightly_rules: bool) -> tuple[int, int]:
    """Clean rounds with an alarm of gate 1 or gate 3 on some value: as the nightly judged
    them before (each gate-1 alarm, each history test at gates.ALPHA) or with its rules now
    (gate 1 confirmed by the night before, gate 3 Holm over the round's values)."""
    trips, rounds = alarms_by_round(nights)
    gate1 = {i for t in trips.values()
             for i, alarm in enumerate(gates.confirmed(t) if nightly_rules else t) if alarm}
    by_figure, _ = _clean_by_figure(nights)
    gate3 = set()
    judged = range(gates.MIN_HISTORY + gates.RECENT_NIGHTS, rounds + 1)
    for end in judged:
        found = {}
        for figure_nights in by_figure.values():
            keys = {k for n in figure_nights for k in n["values"]
                    if not k.endswith(gates.SPREAD_SUFFIX)}
            for key in keys:
                values = [n["values"].get(key) for n in figure_nights][:end]
                verdict = gates.history_verdict([v for v in values if v is not None],
                                                lower_is_worse(key))
                if verdict:
                    found[key] = verdict
        if (gates.family_regressions(found) if nightly_rules
                else [k for k, v in found.items() if v.regressed]):
            gate3.add(end - 1)      # the round of its last night
    return len(gate1 | gate3), rounds


def smallest_caught_confirmed(clean: list[float], within: list[float], floor: float,
                              low_bad: bool, share: float = 0.95) -> float | None:
    """smallest_caught with the next night's confirmation: the smallest slowdown at which
    gate 1 trips on both nights of at least `share` of the pairs of consecutive clean nights,
    each slowed by it and judged against the band of the others (None: fewer than 3)."""
    if len(clean) < 3:
        return None
    pairs = [(i - 1, i) for i in range(1, len(clean))]
    for step in range(1, 96):
        fraction = step / 100
        trips = [tripped(slowed(v, fraction, low_bad), clean[:i] + clean[i + 1:], within,
                         floor, low_bad) for i, v in enumerate(clean)]
        if sum(trips[a] and trips[b] for a, b in pairs) >= share * len(pairs):
            return fraction
    return None


def short(key: str) -> str:
    """'FdbThroughputCheck %size=small %path=key @default+stack|fdb_write_ratio' ->
    'FdbThroughputCheck[small,key]|fdb_write_ratio'."""
    case, var = key.split("|")
    words = case.split()
    params = [w.split("=", 1)[1] for w in words[1:] if w.startswith("%")]
    return f"{words[0]}[{','.join(params)}]|{var}" if params else f"{words[0]}|{var}"


def markdown(rows: list[dict]) -> str:
    lines = ["| figure | gated value | nights | slowdown | median | change vs clean | "
             "gate 1 tripped | band | smallest caught in 95%: gate 1 | gate 1 confirmed | "
             "gate 3 |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        change = f"{r['change']:+.1%}" if r.get("change") is not None else ""
        band = f"{r['band']:.1%} ({r['band_from']})" if r.get("band") is not None else ""
        tripped = "n/a" if r["tripped"] is None else f"{r['tripped']}/{r['nights']}"
        smallest = " | ".join(f"{r[k]:.0%}" if r.get(k) else "" for k in
                              ("smallest_caught", "smallest_caught_confirmed",
                               "smallest_caught_history"))
        history = {True: ", history: caught", False: ", history: missed"}.get(
            bool(r["history"]), "") if r.get("history") is not None else ""
        lines.append(f"| {r['figure']} | {short(r['value'])} | {r['nights']} | {r['slowdown']} | "
                     f"{r['median']:.4g} | {change} | {tripped}{history} | {band} | {smallest} |")
    return "\n".join(lines)


def cmd_analyse(args) -> int:
    out = pathlib.Path(args.out)
    nights = [n for n in load_nights(out)
              if not args.figures or n["figure"] in args.figures.split(",")]
    rows = analyse(nights)
    print(markdown(rows))
    alarmed, rounds = rounds_with_alarms(nights)
    confirmed, _ = rounds_with_alarms(nights, confirm=True)
    history, judged = history_false_alarms(nights)
    family, _ = history_false_alarms(nights, family=True)
    before, _ = whole_nightly_false_alarms(nights, nightly_rules=False)
    after, _ = whole_nightly_false_alarms(nights, nightly_rules=True)
    print(f"\nwhole nightly, one try of each check, clean nights with an alarm on some gated "
          f"value: gate 1 {alarmed} of {rounds}, confirmed by the night before {confirmed}; "
          f"gate 3 {history} of the {judged} it judges, Holm over the values {family}; "
          f"either gate: {before} of {rounds} before, {after} with the nightly's rules")
    if args.series:
        data = {"nights": [{k: n[k] for k in ("figure", "slowdown", "settings", "started",
                                               "seconds", "session", "sanity_failed", "values")}
                            for n in nights]}
        pathlib.Path(args.series).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.series).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"campaign: nights written to {args.series}")
    return 0


def cmd_sessions(args) -> int:
    """The sessions of the campaign's nights of one slowdown whose checks passed their
    sanity: for `record-baseline --session` (a baseline from the clean nights)."""
    for n in load_nights(pathlib.Path(args.out)):
        if n["slowdown"] == args.slowdown and n["session"] and not n["sanity_failed"] \
                and (not args.figures or n["figure"] in args.figures.split(",")):
            print(n["session"])
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run nights of the gated figures' checks")
    r.add_argument("--root", required=True, help="the deployment to run on (bin/iostack deploy)")
    r.add_argument("--out", required=True, help="the campaign's directory")
    r.add_argument("--nights", type=int, default=1)
    r.add_argument("--slowdown", default="clean",
                   help="clean, cpu:F, blkio:F or fdb-env:NAME=VALUE")
    r.add_argument("--figures", help=f"comma-separated, of {', '.join(FIGURES)} (default: all)")
    r.add_argument("--disk-bps", type=float, help="the scratch disk's direct-write rate "
                   "(default: measured before each blkio night)")
    r.set_defaults(func=cmd_run)
    a = sub.add_parser("analyse", help="replay the gates on the campaign's nights")
    a.add_argument("out")
    a.add_argument("--series", help="also write the nights (values only) to this JSON file")
    a.add_argument("--figures", help="comma-separated: only these figures' nights")
    a.set_defaults(func=cmd_analyse)
    s = sub.add_parser("sessions", help="the session UUIDs of one slowdown's nights")
    s.add_argument("out")
    s.add_argument("--slowdown", default="clean")
    s.add_argument("--figures", help="comma-separated (default: all)")
    s.set_defaults(func=cmd_sessions)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    # `analyse ... | head` ends quietly, as a shell tool does
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
