"""bin/iostack report: the stored nightly sessions as a static page people open in the
morning: per check and performance variable, a PNG of its values over time with the
reference band, and a table of the latest results. The sessions come from ReFrame's results
DB (iostack.results).

Variables of a sweep within one job, named `<variable>_<axis>_<count>` (FDB writers,
NetCDF ranks), are drawn against the count instead, one chart per check, variable and axis
from the latest session that has them.
"""
from __future__ import annotations

import datetime
import html
import json
import math
import pathlib
import re

from iostack import references, results
from iostack.run import die


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


def series(sessions: list[dict]) -> dict[tuple, list[dict]]:
    """(check, perf var) -> points {t, value, low, high, result, label, session}."""
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
                })
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


def plot(check: str, var: str, points: list[dict], out: pathlib.Path) -> pathlib.Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.8), dpi=100)
    labels = sorted({p["label"] for p in points})
    colours = plt.get_cmap("tab10")
    top = max([p["value"] for p in points] + [p["high"] for p in points if p["high"] is not None])
    band_top = top * 1.15 if top > 0 else 1.0  # where an open-ended band is drawn up to
    for i, label in enumerate(labels):
        pts = sorted((p for p in points if p["label"] == label), key=lambda p: p["t"])
        t = [datetime.datetime.fromtimestamp(p["t"], datetime.timezone.utc) for p in pts]
        y = [p["value"] for p in pts]
        colour = colours(i % 10)
        if pts[-1]["no_baseline"]:
            label += " (no baseline)"
        ax.plot(t, y, "-o", color=colour, markersize=4, linewidth=1.2, label=label)
        failed = [(ti, p["value"]) for ti, p in zip(t, pts, strict=True) if p["result"] == "fail"]
        if failed:
            ax.plot(*zip(*failed, strict=True), "x", color="red", markersize=9, mew=2)
        if all(p["low"] is None and p["high"] is None for p in pts):
            continue
        lo = [p["low"] if p["low"] is not None else 0.0 for p in pts]
        hi = [p["high"] if p["high"] is not None else band_top for p in pts]
        if len(t) == 1:  # a band needs two instants: widen a lone point by an hour each way
            t = [t[0] - datetime.timedelta(hours=1), t[0] + datetime.timedelta(hours=1)]
            lo, hi = lo * 2, hi * 2
        ax.step(t, lo, where="post", color=colour, linestyle="--", linewidth=0.8)
        ax.fill_between(t, lo, hi, step="post", color=colour, alpha=0.12)
    unit = points[-1]["unit"]
    ax.set_title(f"{check}: {var}")
    ax.set_ylabel(f"{var} ({unit})" if unit else var)
    ax.set_ylim(bottom=0, top=band_top * 1.05)
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.text(0.01, 0.01, "shaded: reference band (dashed: lower bound); x: failed",
             fontsize=7, color="0.35")
    fig.tight_layout()
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


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


def latest_table(session: dict) -> str:
    rows = []
    for (name, system, partition, environ), tc in sorted(results.last_attempts(session).items()):
        perf = []
        for var, pv in results.perf_values(tc).items():
            lo, hi = bounds(pv.ref, pv.lower, pv.upper)
            if references.is_no_baseline(pv.ref):
                band = "no baseline"
            else:
                band = f"[{_fmt(lo) or '-inf'}, {_fmt(hi) or 'inf'}]" if (lo, hi) != (None, None) else ""
            perf.append(f"{html.escape(var)} = {_fmt(pv.value)} {html.escape(pv.unit or '')}"
                        + (f" <small>{html.escape(band)}</small>" if band else ""))
        result = tc.get("result", "")
        reason = tc.get("fail_reason") or ""
        rows.append(
            f"<tr class='{html.escape(result)}'><td>{html.escape(name)}</td>"
            f"<td>{html.escape(system)}:{html.escape(partition)}+{html.escape(environ)}</td>"
            f"<td class='result'>{html.escape(result.upper())}</td>"
            f"<td>{'<br>'.join(perf)}</td><td><small>{html.escape(reason[:300])}</small></td></tr>")
    return ("<table><tr><th>test case</th><th>where</th><th>result</th>"
            "<th>performance (reference band)</th><th>failure</th></tr>\n"
            + "\n".join(rows) + "\n</table>")


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }}
table {{ border-collapse: collapse; margin-bottom: 2em; }}
td, th {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }}
tr.pass td.result {{ background: #d9f2d9; }}
tr.fail td.result {{ background: #f8d0d0; }}
tr.skip td.result {{ background: #eee; }}
figure {{ margin: 0 0 2em 0; }}
</style></head>
<body>
<h1>{title}</h1>
<p>{summary}</p>
<h2>Latest results</h2>
{table}
<h2>Performance over time</h2>
{figures}
</body></html>
"""


def write(site: str, sessions: list[dict], out: pathlib.Path) -> pathlib.Path:
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.png"):
        old.unlink()
    latest = sessions[-1]
    info = latest["session_info"]
    figures = []
    for (check, var), points in sorted(series(sessions).items()):
        png = plot(check, var, points, out)
        figures.append(f"<figure><img src='{html.escape(png.name)}' alt='{html.escape(check)} "
                       f"{html.escape(var)} over time'><figcaption>{html.escape(check)}: "
                       f"{html.escape(var)}</figcaption></figure>")
    for (check, var, axis), sweep in sorted(sweeps(sessions).items()):
        png = plot_sweep(check, var, axis, sweep, out)
        figures.append(f"<figure><img src='{html.escape(png.name)}' alt='{html.escape(check)} "
                       f"{html.escape(var)} by {axis}'><figcaption>{html.escape(check)}: "
                       f"{html.escape(var)} by {axis}</figcaption></figure>")
    failures = info.get("num_failures", 0)
    summary = (f"{len(sessions)} stored session(s); latest {html.escape(info.get('uuid', ''))} "
               f"started {html.escape(info.get('time_start', ''))} on {html.escape(info.get('hostname', ''))}: "
               f"{info.get('num_cases', 0)} test case(s), {failures} failure(s). "
               f"Repository commit {html.escape(str(info.get('commit', 'unknown')))}, "
               f"spack.lock sha256 {html.escape(str(info.get('spack_lock_sha256', 'unknown')))}.")
    page = PAGE.format(title=html.escape(f"iostack nightly: {site}"), summary=summary,
                       table=latest_table(latest),
                       figures="\n".join(figures) or "<p>No performance variables stored.</p>")
    index = out / "index.html"
    index.write_text(page)
    (out / "latest-session.json").write_text(json.dumps(latest, indent=1))
    return index


def main(site: str, system: str, root: pathlib.Path, out: pathlib.Path | None,
         period: str = results.ALL_TIME) -> int:
    sessions = results.stored_sessions(system, root, period)
    if not sessions:
        die(f"no stored sessions in the results DB under {root / 'reframe'} "
            f"for {period}: run `bin/iostack nightly --site {site}` first", rc=1)
    out = out or root / "reframe" / "report"
    index = write(site, sessions, out)
    print(f"iostack: report: {index} ({len(list(out.glob('*.png')))} charts)")
    return 0
