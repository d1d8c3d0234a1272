"""The verdict of `quickcode bench soak`: pure rules over sampled series (time in s since the start, a value).

After a warm-up (caches fill, the allocator reaches its working set, every label seen once):
  * memory (`grows_at_most`): the median of the last window is at most `max_growth` above the median of the
    first window after the warm-up (medians: one busy sample does not decide);
  * open files, tasks (`stays_bounded`): the median of the last third is within a slack of the median of the
    first third (the slack is absolute or relative, whichever is larger); metric series, which never go
    away, by the maximum;
  * queue depth (`drains`): the minimum of the last third is within a slack of the minimum of the first — a
    queue that keeps up returns to its floor between bursts, one that falls behind does not;
  * counts that must be zero (hung sessions, errors shown to well-behaved editors, samples the backend did not
    answer): `is_zero`.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass
class Rule:
    name: str
    passed: bool
    first: float          # the figure of the first part after the warm-up
    last: float           # the figure of the last part
    limit: float          # what `last` had to stay within
    detail: str

    def row(self) -> list:
        return [self.name, "pass" if self.passed else "FAIL", self.first, self.last, self.limit, self.detail]


def after_warmup(series: list[tuple[float, float]], warmup_s: float) -> list[float]:
    """The values sampled at or after `warmup_s` (NaN and None left out), in time order."""
    return [v for t, v in sorted(series) if t >= warmup_s and v is not None and v == v]


def thirds(values: list[float]) -> tuple[list[float], list[float]]:
    """(first third, last third) of `values` (at least one value each when there are any)."""
    k = max(1, len(values) // 3)
    return values[:k], values[-k:]


def grows_at_most(name: str, series: list[tuple[float, float]], warmup_s: float, window_s: float,
                  max_growth: float) -> Rule:
    """Median of the last `window_s` ≤ (1 + max_growth) × median of the first `window_s` after the warm-up."""
    pts = [(t, v) for t, v in sorted(series) if t >= warmup_s and v is not None and v == v]
    if len(pts) < 4:
        return Rule(name, False, float("nan"), float("nan"), float("nan"), f"{len(pts)} samples after the warm-up")
    t0, t1 = pts[0][0], pts[-1][0]
    span = min(window_s, (t1 - t0) / 3)
    first = [v for t, v in pts if t <= t0 + span] or [pts[0][1]]
    last = [v for t, v in pts if t >= t1 - span] or [pts[-1][1]]
    m0, m1 = statistics.median(first), statistics.median(last)
    limit = m0 * (1 + max_growth)
    return Rule(name, m1 <= limit, m0, m1, limit,
                f"median of the last {span:.0f} s vs the first {span:.0f} s after the warm-up: "
                f"{100 * (m1 / m0 - 1) if m0 else float('nan'):+.1f} % (at most {100 * max_growth:+.0f} %)")


def stays_bounded(name: str, series: list[tuple[float, float]], warmup_s: float, abs_slack: float,
                  rel_slack: float, stat: str = "median") -> Rule:
    """stat(last third) ≤ stat(first third) + max(abs_slack, rel_slack × stat(first third)); `stat` the median
    (a level: the spikes of abuse episodes do not decide it, a leak raises it) or the max (a count that never
    falls, such as metric series)."""
    values = after_warmup(series, warmup_s)
    if len(values) < 3:
        return Rule(name, False, float("nan"), float("nan"), float("nan"), f"{len(values)} samples after the warm-up")
    first, last = thirds(values)
    f = statistics.median if stat == "median" else max
    m0, m1 = f(first), f(last)
    limit = m0 + max(abs_slack, rel_slack * m0)
    return Rule(name, m1 <= limit, m0, m1, limit, f"{stat} of the last third vs the first third "
                f"(slack {abs_slack:g} or {100 * rel_slack:g} %; max {max(first):g} then {max(last):g})")


def drains(name: str, series: list[tuple[float, float]], warmup_s: float, slack: float) -> Rule:
    """min(last third) ≤ min(first third) + slack."""
    values = after_warmup(series, warmup_s)
    if len(values) < 3:
        return Rule(name, False, float("nan"), float("nan"), float("nan"), f"{len(values)} samples after the warm-up")
    first, last = thirds(values)
    m0, m1 = min(first), min(last)
    return Rule(name, m1 <= m0 + slack, m0, m1, m0 + slack, f"min of the last third vs the first third "
                f"(slack {slack:g})")


def is_zero(name: str, count: int, detail: str = "") -> Rule:
    return Rule(name, count == 0, 0, count, 0, detail)


@dataclass
class Bounds:
    """The slacks of the rules (`quickcode bench soak` flags set them)."""
    rss_growth: float = 0.05
    window_s: float = 300.0
    fds_abs: float = 32
    fds_rel: float = 0.10
    tasks_abs: float = 64
    tasks_rel: float = 0.20
    series_abs: float = 40
    queue_slack: float = 4


def verdict(samples: dict[str, list[tuple[float, float]]], warmup_s: float, hung: int, editor_errors: int,
            bounds: Bounds | None = None, failed_samples: int = 0) -> list[Rule]:
    """Every rule over the sampled series (`samples`: name → [(t_s, value)]; the names `soak.py` samples)."""
    b = bounds or Bounds()
    rules = [grows_at_most("backend RSS", samples["rss_backend"], warmup_s, b.window_s, b.rss_growth),
             grows_at_most("engine processes RSS", samples["rss_engine"], warmup_s, b.window_s, b.rss_growth),
             stays_bounded("backend open files", samples["fds_backend"], warmup_s, b.fds_abs, b.fds_rel),
             stays_bounded("engine open files", samples["fds_engine"], warmup_s, b.fds_abs, b.fds_rel),
             stays_bounded("event-loop tasks", samples["tasks"], warmup_s, b.tasks_abs, b.tasks_rel),
             stays_bounded("metric series", samples["series"], warmup_s, b.series_abs, 0.0, "max"),
             drains("queue depth", samples["queued"], warmup_s, b.queue_slack),
             drains("live requests", samples["live"], warmup_s, b.queue_slack)]
    rules += [is_zero("hung editor sessions", hung, "an LSP request or command not answered in time"),
              is_zero("errors shown to editors", editor_errors, "JSON-RPC errors and window/showMessage errors"),
              is_zero("samples not taken", failed_samples, "the backend gone, or /metrics not answering")]
    return rules
