"""The one percentile of the project's reports (the language server's latency report and status, the
benchmarks, the demo): pure Python, as the language server installs without numpy."""
from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(values: Iterable[float], q: float, empty: float = math.nan) -> float:
    """Linear-interpolated percentile (q in 0..100, numpy's default method); `empty` for no values."""
    xs = sorted(values)
    if not xs:
        return empty
    k = (len(xs) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)
