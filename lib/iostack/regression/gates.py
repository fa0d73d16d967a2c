"""How the nightly judges a gated performance variable, from the node's measured noise
(reframe-tests/README.md, "Gates"). Pure functions: `baseline` (record-baseline) sets the
bands, `nightly` runs the history test after ReFrame, the sensitivity campaign
(`iostack-testbed campaign`) replays both on recorded nights.

1. Within a run: every gated figure is the median of its repeats (3 interleaved FDB/fio
   pairs, 3 IOR repetitions, 3 mdtest iterations, ...), with its spread, (max - min) /
   median, reported beside it as `<figure>_spread`.
2. Tonight against the reference (ReFrame's own check of `reference`): the reference is
   the median of the recorded nights and its band BAND_SIGMAS robust standard deviations of
   those nights (1.4826 x MAD / median) and at least as wide as the worst of them (a
   false-alarm rate of at most 1/(N+1) from N nights, whatever the noise's shape), never
   narrower than the figure's threshold in the references file (its floor); recorded
   from fewer than 3 nights, the band comes from the within-run spread instead, widened
   (nights vary more than repeats).
3. History (`history_verdict`): the last RECENT_NIGHTS nights together against up to
   HISTORY_NIGHTS nights before them, a one-sided Mann-Whitney U test (exact): a
   regression that persists is caught even when each night alone stays inside the band.
   The nightly tests every gated figure at once, so their p-values are judged together
   (`holm`): Holm-Bonferroni at FAMILY_ALPHA over the night's figures, which bounds the
   chance that a clean night raises any history alarm, not each figure's.

The whole nightly's false alarms: gate 1's are bounded per figure (the worst-night term),
and ~24 figures add them up (5 of the campaign's 20 clean nights had one); the nightly
therefore fails on a time figure's gate-1 alarm only when the night before raised it too
(iostack.regression.nightly.unconfirmed_alarms; `confirmed` here).
"""
from __future__ import annotations

import dataclasses
import statistics

#: the band, in robust standard deviations of the recorded nights: a clean night falls
#: outside it ~0.6% of the time if the noise were normal. That is no bound for heavier
#: tails (the sensitivity campaign found them here): the worst-night term of `band` is
BAND_SIGMAS = 2.5
#: a band from a single run's within-run spread alone: the range of 3 repeats is ~1.7
#: standard deviations of one repeat (normal d2 constant), and nights vary more than
#: repeats within one night do, hence the factor 2 over it
WITHIN_RUN_RANGE_SIGMAS = 1.7
NIGHTS_OVER_REPEATS = 2.0
#: fewer recorded nights than this and the night-to-night spread is not estimated
MIN_NIGHTS_FOR_SPREAD = 3
#: history test
RECENT_NIGHTS = 3
HISTORY_NIGHTS = 20
MIN_HISTORY = 8
ALPHA = 0.01
#: the chance that a clean night raises a history alarm on any of its figures (`holm`)
FAMILY_ALPHA = 0.05
#: a significant shift smaller than this is not a regression worth a failed nightly
MIN_SHIFT = 0.05
#: suffix of the perf variable holding a figure's within-run spread
SPREAD_SUFFIX = "_spread"


def _nights_and_median(values) -> tuple[list[float], float] | None:
    """The nights as floats and their median; None for fewer than MIN_NIGHTS_FOR_SPREAD
    values or a zero median (no relative spread to speak of)."""
    values = [float(v) for v in values]
    if len(values) < MIN_NIGHTS_FOR_SPREAD:
        return None
    med = statistics.median(values)
    return None if med == 0 else (values, med)


def robust_spread(values) -> float | None:
    """1.4826 x MAD / median: a relative standard deviation that one outlier night does
    not move (None for fewer than MIN_NIGHTS_FOR_SPREAD values or a zero median)."""
    found = _nights_and_median(values)
    if found is None:
        return None
    values, med = found
    return 1.4826 * statistics.median(abs(v - med) for v in values) / abs(med)


@dataclasses.dataclass(frozen=True)
class Band:
    """A gated figure's band, as a fraction of its reference value, and what set it."""

    width: float
    #: robust relative spread of the recorded nights (None: too few)
    nights_spread: float | None
    #: median within-run spread of the recorded nights (None: not reported)
    within_run_spread: float | None
    nights: int
    #: 'nights', 'worst-night', 'within-run' or 'floor': which is widest
    source: str

    def as_yaml(self) -> dict:
        return {"nights": self.nights,
                "nights_spread": None if self.nights_spread is None else round(self.nights_spread, 6),
                "within_run_spread": (None if self.within_run_spread is None
                                      else round(self.within_run_spread, 6)),
                "band_from": self.source}


def worst_night(values, lower_is_worse: bool) -> float | None:
    """How far the worst of the recorded nights lies from their median, the bad way, as a
    fraction of it (None for fewer than MIN_NIGHTS_FOR_SPREAD values or a zero median)."""
    found = _nights_and_median(values)
    if found is None:
        return None
    values, med = found
    worst = min(values) if lower_is_worse else max(values)
    return max(0.0, (med - worst) / med if lower_is_worse else (worst - med) / med)


def band(nightly_values, within_run_spreads=(), floor: float = 0.0,
         lower_is_worse: bool | None = None) -> Band:
    """The band of a figure recorded from these nights' values (each night's median).
    Given its side, the band also holds every recorded night ('worst-night'): then a
    clean night falls outside it only if it is worse than all N recorded ones, which for
    exchangeable nights happens with probability 1/(N+1) whatever the noise's shape
    (heavy-tailed I/O times included): under 5% from 20 nights."""
    values = list(nightly_values)
    nights = robust_spread(values)
    within = statistics.median(within_run_spreads) if within_run_spreads else None
    candidates = {"floor": abs(floor)}
    if nights is not None:
        candidates["nights"] = BAND_SIGMAS * nights
        worst = worst_night(values, lower_is_worse) if lower_is_worse is not None else None
        if worst is not None:
            # a hair beyond the worst night, so that night itself is inside
            candidates["worst-night"] = worst * (1 + 1e-9) + 1e-12
    elif within is not None:
        # one or two nights: what their repeats say, widened for the nights' own variation
        candidates["within-run"] = (BAND_SIGMAS * NIGHTS_OVER_REPEATS * within
                                    / WITHIN_RUN_RANGE_SIGMAS)
    source = max(candidates, key=lambda k: candidates[k])
    return Band(min(candidates[source], 0.95), nights, within, len(values), source)


@dataclasses.dataclass(frozen=True)
class HistoryVerdict:
    recent: list[float]
    history: list[float]
    #: relative change of the recent median against the history's (negative: lower)
    shift: float
    p_value: float
    regressed: bool
    #: the shift the bad way (positive: worse)
    bad_shift: float = 0.0

    def describe(self) -> str:
        return (f"last {len(self.recent)} nights' median {statistics.median(self.recent):.4g} "
                f"vs {statistics.median(self.history):.4g} over the {len(self.history)} "
                f"before ({self.shift:+.1%}, one-sided Mann-Whitney p={self.p_value:.2g})")


def history_verdict(series, lower_is_worse: bool, recent_nights: int = RECENT_NIGHTS,
                    history_nights: int = HISTORY_NIGHTS) -> HistoryVerdict | None:
    """Whether the last `recent_nights` values of `series` (oldest first, tonight last) are
    worse than the up to `history_nights` before them: a one-sided exact Mann-Whitney U test
    at ALPHA, and a median shift of at least MIN_SHIFT the bad way. None when the series
    has fewer than MIN_HISTORY nights before the recent ones."""
    from scipy.stats import mannwhitneyu

    values = [float(v) for v in series]
    recent = values[-recent_nights:]
    history = values[:-recent_nights][-history_nights:]
    if len(recent) < recent_nights or len(history) < MIN_HISTORY:
        return None
    before = statistics.median(history)
    shift = (statistics.median(recent) - before) / before if before else 0.0
    p = float(mannwhitneyu(recent, history, alternative="less" if lower_is_worse else "greater",
                           method="exact").pvalue)
    bad = -shift if lower_is_worse else shift
    return HistoryVerdict(recent, history, shift, p, p < ALPHA and bad >= MIN_SHIFT, bad)


def holm(p_values: dict, alpha: float = FAMILY_ALPHA) -> set:
    """The keys of `p_values` that Holm-Bonferroni rejects at family-wise rate `alpha`: the
    k-th smallest p (from 0) against alpha / (m - k), stopping at the first that is not
    below it. Without a model of how the figures' noise is related (FDB's figures of one
    job share a disk), it holds whatever the dependence."""
    ordered = sorted(p_values.items(), key=lambda kv: kv[1])
    rejected = set()
    for k, (key, p) in enumerate(ordered):
        if p >= alpha / (len(ordered) - k):
            break
        rejected.add(key)
    return rejected


def family_regressions(verdicts: dict, alpha: float = FAMILY_ALPHA) -> set:
    """The keys of `verdicts` ({key: HistoryVerdict}, a night's figures) that regressed as a
    family: Holm-rejected at `alpha`, and a median shift of at least MIN_SHIFT the bad way
    (`regressed` of a verdict is its own test at ALPHA, which alone is what a figure on its
    own would get)."""
    rejected = holm({k: v.p_value for k, v in verdicts.items()}, alpha)
    return {k for k in rejected if verdicts[k].bad_shift >= MIN_SHIFT}


def confirmed(tripped_nights) -> list[bool]:
    """Gate 1 with the next night's confirmation, over a figure's nights in order (whether
    each tripped): a night alarms only when the night before tripped too."""
    nights = list(tripped_nights)
    return [bool(t and i > 0 and nights[i - 1]) for i, t in enumerate(nights)]
