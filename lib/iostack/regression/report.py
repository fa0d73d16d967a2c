"""bin/iostack report: the stored nightly sessions as a static page people open in the
morning. For each test case its latest result, with the reference band its value had to
meet; per check and performance variable, a PNG of its values over time with the band and
the failed points marked, and below it every point with the release it ran on (linked to
the page's release table) and that release's lock sha256. The sessions come from
ReFrame's results DB (iostack.regression.results); the releases from the deployment
(iostack.deployment.releases). Between them, the latest session against the earlier ones
as ReFrame's own `--performance-compare` computes it. The page is a Jinja2 template,
templates/report.html; this module gives it the rows and draws the charts.

Variables of a sweep within one job, named `<variable>_<axis>_<count>` (FDB writers,
NetCDF ranks), are drawn against the count instead, one chart per check, variable and axis
from the latest session that has them.
"""
from __future__ import annotations

import logging
import datetime
import json
import math
import os
import pathlib
import re
from typing import Any

import jinja2

from iostack.core.errors import Failed
from iostack.deployment import releases
from iostack.site.target import Target
from iostack.regression import references, results

log = logging.getLogger(__name__)


def bounds(ref, lower, upper):
    """(low, high) absolute bounds of a reference tuple; None for none/no baseline."""
    if (not isinstance(ref, (int, float)) or references.is_no_baseline(ref)
            or ref == 0 and lower is None):
        return None, None
    lo = ref * (1 + lower) if lower is not None else None
    hi = ref * (1 + upper) if upper is not None else None
    if ref == 0:  # ReFrame: zero references take absolute thresholds
        lo, hi = lower, upper
    return lo, hi


#: a variable of a sweep: its name, the axis swept and the count
SWEEP = re.compile(r"^(?P<var>.+)_(?P<axis>writers|ranks)_(?P<count>\d+)$")


def _label(tc: dict) -> str:
    return (f"{tc['system']}:{tc['partition']}+{tc['environ']} "
            f"{' '.join(tc['name'].split()[1:])}").strip()


def _finite(pv) -> bool:
    return isinstance(pv.value, (int, float)) and math.isfinite(pv.value)


def stack_of(info: dict) -> dict:
    """The release a session ran on and its lock sha256 (`bin/iostack nightly` stores
    them as session extras; sessions from before releases have no release)."""
    return {"release": info.get("release") or "", "lock": info.get("spack_lock_sha256") or "",
            "commit": info.get("commit") or ""}


def series(sessions: list[dict]) -> dict[tuple, list[dict]]:
    """(check, perf var) -> points {t, value, low, high, result, label, session, release,
    lock, commit}."""
    out: dict[tuple, list[dict]] = {}
    for session in sessions:
        info = session["session_info"]
        for tc in results.last_attempts(session).values():
            for var, pv in results.perf_values(tc).items():
                if not _finite(pv) or SWEEP.match(var):
                    continue
                lo, hi = bounds(pv.ref, pv.lower, pv.upper)
                out.setdefault((results.check_of(tc), var), []).append({
                    "t": tc.get("job_completion_time_unix") or info.get("time_start_unix"),
                    "value": pv.value, "low": lo, "high": hi, "unit": pv.unit or "",
                    "result": pv.result or tc.get("result"),
                    "no_baseline": references.is_no_baseline(pv.ref),
                    "label": _label(tc),
                    "session": info.get("uuid"),
                    **stack_of(info),
                })
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


def _utc(unix) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(unix, datetime.timezone.utc)


def plot(check: str, var: str, points: list[dict], out: pathlib.Path) -> pathlib.Path:
    """One chart: each test case's values over time, its reference band shaded, failed
    points crossed in red. Records where each point landed in the image (p["px"],
    p["py"], pixels from the top left), so the page can link the points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    labels = sorted({p["label"] for p in points})
    common, short = legend_labels(labels)
    fig, ax = plt.subplots(figsize=(11, 5.6), dpi=100)
    colours = plt.get_cmap("tab10")
    top = max([p["value"] for p in points] + [p["high"] for p in points if p["high"] is not None])
    y_top = (top * 1.2 if top > 0 else 1.0)
    from matplotlib.artist import Artist

    handles: list[Artist] = []
    banded, any_failed = False, False
    for i, label in enumerate(labels):
        pts = sorted((p for p in points if p["label"] == label), key=lambda p: p["t"])
        # datetimes: matplotlib converts them (its units framework), which its type stubs
        # do not describe
        t: list[Any] = [_utc(p["t"]) for p in pts]
        y = [p["value"] for p in pts]
        colour = colours(i % 10)
        name = short[label] + (" (no baseline recorded)" if pts[-1]["no_baseline"] else "")
        (line,) = ax.plot(t, y, "-o", color=colour, markersize=5, linewidth=1.4, label=name)
        handles.append(line)
        failed = [(ti, p["value"]) for ti, p in zip(t, pts, strict=True) if p["result"] == "fail"]
        if failed:
            any_failed = True
            ax.plot(*zip(*failed, strict=True), "x", color="red", markersize=11, mew=2.5, zorder=5)
        if all(p["low"] is None and p["high"] is None for p in pts):
            continue
        banded = True
        # an open end of the band is drawn to the edge of the chart
        lo = [p["low"] if p["low"] is not None else 0.0 for p in pts]
        hi = [p["high"] if p["high"] is not None else y_top for p in pts]
        if len(t) == 1:  # a band needs two instants: widen a lone point by an hour each way
            t = [t[0] - datetime.timedelta(hours=1), t[0] + datetime.timedelta(hours=1)]
            lo, hi = lo * 2, hi * 2
        ax.step(t, lo, where="post", color=colour, linestyle="--", linewidth=0.9)
        ax.fill_between(t, lo, hi, step="post", color=colour, alpha=0.09)
    unit = points[-1]["unit"]
    ax.set_title(f"{check}: {var}" + (f" ({unit})" if unit else ""), fontsize=13,
                 pad=22 if common else 6)
    if common:  # what every line shares, once, above the plot
        ax.text(0.5, 1.015, common, transform=ax.transAxes, ha="center", va="bottom",
                fontsize=9.5, color="0.3")
    ax.set_ylabel(f"{var} ({unit})" if unit else var, fontsize=11)
    ax.set_xlabel("time the test case ran (UTC)", fontsize=11)
    ax.set_ylim(bottom=0, top=y_top)
    locator = mdates.AutoDateLocator(minticks=4, maxticks=10)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=datetime.timezone.utc))
    ax.tick_params(labelsize=10)
    ax.grid(True, alpha=0.3)
    if banded:
        handles.append(Patch(color="0.5", alpha=0.25, label="reference band: the range that "
                                                          "passes (dashed: its lower bound)"))
    if any_failed:
        handles.append(Line2D([], [], color="red", marker="x", linestyle="", markersize=9,
                              mew=2.5, label="failed (out of the band, or the test case failed)"))
    # below the plot, one entry a line: the figure grows by the legend's height
    fig.set_figheight(4.6 + 0.2 * len(handles))
    inch = 1 / fig.get_figheight()
    fig.subplots_adjust(left=0.08, right=0.98, top=1 - 0.55 * inch,
                        bottom=(0.7 + 0.2 * len(handles)) * inch)
    fig.legend(handles=handles, fontsize=9.5, loc="lower left", bbox_to_anchor=(0.08, 0.01),
               ncol=1, frameon=False)
    fig.canvas.draw()
    height = fig.bbox.height
    for p in points:
        x, y = ax.transData.transform((mdates.date2num(_utc(p["t"])), p["value"]))
        p["px"], p["py"] = round(float(x)), round(float(height - y))
    path = out / f"{_slug(check)}__{_slug(var)}.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def sweeps(sessions: list[dict]) -> dict[tuple, dict]:
    """(check, var, axis) -> {"session", "unit", "lines": {label: [(count, value)]}} from
    the latest session with that sweep."""
    out: dict[tuple, dict] = {}
    for session in sessions:
        found: dict[tuple, dict] = {}
        for tc in results.last_attempts(session).values():
            for name, pv in results.perf_values(tc).items():
                m = SWEEP.match(name)
                if m and _finite(pv):
                    sweep = found.setdefault((results.check_of(tc), m["var"], m["axis"]), {
                        "session": session["session_info"].get("uuid"), "unit": pv.unit or "",
                        "lines": {}})
                    sweep["lines"].setdefault(_label(tc), []).append((int(m["count"]),
                                                                      pv.value))
        out.update(found)
    for sweep in out.values():
        for points in sweep["lines"].values():
            points.sort()
    return out


def plot_sweep(check: str, var: str, axis: str, sweep: dict, out: pathlib.Path) -> pathlib.Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.8), dpi=100)
    counts = sorted({n for points in sweep["lines"].values() for n, _ in points})
    for label, points in sorted(sweep["lines"].items()):
        ax.plot(*zip(*points, strict=True), "-o", markersize=4, linewidth=1.2, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts, [str(n) for n in counts])
    ax.set_xlabel(axis)
    unit = sweep["unit"]
    ax.set_ylabel(f"{var} ({unit})" if unit else var)
    ax.set_ylim(bottom=0)
    ax.set_title(f"{check}: {var} by {axis}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.text(0.01, 0.01, f"session {sweep['session']}", fontsize=7, color="0.35")
    fig.tight_layout()
    path = out / f"{_slug(check)}__{_slug(var)}__by_{axis}.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def legend_labels(labels: list[str]) -> tuple[str, dict[str, str]]:
    """(the words every label shares, {label: its other words}): a chart's test cases
    usually differ in one or two parameters, which is what its legend should show."""
    words = [label.split() for label in labels]
    common = [w for w in words[0] if all(w in ws for ws in words[1:])] if len(labels) > 1 else []
    return " ".join(common), {label: " ".join(w for w in label.split() if w not in common) or label
                              for label in labels}


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


def band_text(lo, hi, unit: str = "", no_baseline: bool = False) -> str:
    """A reference band as a person reads it: "0.09 to 0.46 ratio", "at least 0.09 ratio"."""
    if no_baseline:
        return "no baseline recorded (bin/iostack record-baseline)"
    unit = f" {unit}" if unit else ""
    if lo is not None and hi is not None:
        return f"{_fmt(lo)} to {_fmt(hi)}{unit}"
    if lo is not None:
        return f"at least {_fmt(lo)}{unit}"
    if hi is not None:
        return f"at most {_fmt(hi)}{unit}"
    return "not checked"


def latest_cases(sessions: list[dict]) -> dict[tuple, tuple[dict, dict]]:
    """Each test case's last attempt in the newest session that ran it, with that
    session's info."""
    latest = {}
    for session in sessions:  # oldest first: later sessions replace earlier ones
        for key, tc in results.last_attempts(session).items():
            latest[key] = (tc, session["session_info"])
    return latest


def cpu_text(tc: dict) -> str:
    """The CPU frequency policy the case's job ran under (shown, never gated): governor,
    current frequency and cap, what srun was asked for; `cpufreq absent` where the node has
    none (a VM). Empty for a case run before jobs recorded it."""
    governor = tc.get("cpu_governor")
    if not governor:
        return ""
    parts = ["cpufreq absent" if governor == "absent" else f"governor {governor}"]
    for key, what in (("cpu_freq_cur_khz", "now"), ("cpu_freq_max_khz", "cap")):
        if tc.get(key):
            parts.append(f"{what} {tc[key] / 1e6:.2f} GHz")
    if tc.get("cpu_freq_requested"):
        parts.append(f"asked {tc['cpu_freq_requested']}")
    return ", ".join(parts)


def latest_rows(sessions: list[dict]) -> list[dict]:
    """The latest results table: a row per test case, its values with their bands."""
    rows = []
    for (name, system, partition, environ), (tc, info) in sorted(latest_cases(sessions).items()):
        perf = []
        for var, pv in results.perf_values(tc).items():
            lo, hi = bounds(pv.ref, pv.lower, pv.upper)
            perf.append({"var": var, "value": pv.value, "unit": pv.unit or "",
                         "failed": pv.result == "fail",
                         "band": band_text(lo, hi, pv.unit or "", references.is_no_baseline(pv.ref))})
        rows.append({"name": name, "where": f"{system}:{partition}+{environ or ''}",
                     "result": tc.get("result", ""), "reason": (tc.get("fail_reason") or "")[:300],
                     "when": tc.get("job_completion_time_unix") or info.get("time_start_unix"),
                     "release": stack_of(info)["release"], "perf": perf,
                     "node": tc.get("node_key") or "", "cpu": cpu_text(tc)})
    return rows


def release_rows(root: pathlib.Path | None, sessions: list[dict], out: pathlib.Path) -> list[dict]:
    """The deployment's releases (and any a session names that is gone), each an anchor
    the points link to."""
    known = releases.listing(root) if root else []
    cur = releases.current(root) if root and known else None
    count: dict[str, int] = {}
    for s in sessions:
        rid = s["session_info"].get("release")
        if rid:
            count[rid] = count.get(rid, 0) + 1
    rows = [{"id": r.id, "link": os.path.relpath(r.path / releases.META, out),
             "commit": r.meta.get("commit", ""), "lock": r.meta.get("spack_lock_sha256", ""),
             "created": r.created.replace("T", " ").rstrip("Z"), "verdict": r.verdict,
             "current": r.id == cur, "sessions": count.get(r.id, 0), "gone": False}
            for r in known]
    rows += [{"id": rid, "gone": True, "sessions": count[rid]}
             for rid in sorted(set(count) - {r.id for r in known})]
    return rows


def _template() -> jinja2.Template:
    env = jinja2.Environment(loader=jinja2.PackageLoader("iostack.regression", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters.update(num=_fmt, utc=lambda unix, fmt="%Y-%m-%d %H:%M": _utc(unix).strftime(fmt),
                       slug=_slug)
    env.globals["band"] = band_text
    return env.get_template("report.html")


def write(site: str, sessions: list[dict], out: pathlib.Path, root: pathlib.Path | None = None,
          comparison: list[results.Comparison] | None = None) -> pathlib.Path:
    """The page and its charts in `out`; `root`: the deployment whose releases to list;
    `comparison`: the latest session against the earlier ones (results.compare_latest;
    None: no such section)."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.png"):
        old.unlink()
    latest = sessions[-1]
    charts = [{"check": check, "var": var, "png": plot(check, var, points, out).name,
               "points": sorted(points, key=lambda p: p["t"], reverse=True)}
              for (check, var), points in sorted(series(sessions).items())]
    sweep_charts = [{"check": check, "var": var, "axis": axis,
                     "png": plot_sweep(check, var, axis, sweep, out).name}
                    for (check, var, axis), sweep in sorted(sweeps(sessions).items())]
    page = _template().render(
        site=site, sessions=sessions, info=latest["session_info"],
        stack=stack_of(latest["session_info"]), latest=latest_rows(sessions),
        comparison=comparison, charts=charts, sweep_charts=sweep_charts,
        releases=release_rows(root, sessions, out))
    index = out / "index.html"
    index.write_text(page)
    (out / "latest-session.json").write_text(json.dumps(latest, indent=1))
    return index


def main(target: Target, out: pathlib.Path | None, period: str = results.ALL_TIME) -> int:
    sessions = results.stored_sessions(target, period)
    if not sessions:
        raise Failed(f"no stored sessions in the results DB {target.results_db} "
                     f"for {period}: run `bin/iostack nightly --site {target.site}` first")
    out = out or target.root / "reframe" / "report"
    index = write(target.site, sessions, out, target.root,
                  results.compare_latest(target, sessions, period))
    log.info(f"report: {index} ({len(list(out.glob('*.png')))} charts)")
    return 0
