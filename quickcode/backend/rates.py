"""What the scheduler's forecast is made of (pure): the engine's measured speed (`RateModel`: a first token
as a fixed step plus the prompt at a rate, decode and output share) and how late first tokens come against
the forecast (`Lateness`)."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass
class RateModel:
    """Measured engine speed. A first token takes `step_s` (an engine step, whatever the prompt's length)
    plus the prompt at `prefill_tok_s` (prefills are serial): a least-squares line through the last
    `fit_window` prefill samples (step 0 while their lengths do not tell it), an EWMA of tokens/s until
    there are `fit_min_samples`. Decode in tokens/s of one running request; output as the share of
    `max_tokens` a request generates before it stops by itself (EWMAs). One sample moves an EWMA at most
    ×4 (outliers: a prompt from the prefix cache, a step that batched several prefills)."""
    prefill_tok_s: float = 20_000.0
    decode_tok_s: float = 100.0
    output_fill: float = 0.5
    alpha: float = 0.2
    samples: int = field(default=0)
    step_s: float = 0.0
    fit_window: int = 64
    fit_min_samples: int = 8
    step_max_s: float = 1.0
    ewma_tok_s: float = field(init=False)
    fit: deque = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.ewma_tok_s = self.prefill_tok_s
        self.fit = deque(maxlen=self.fit_window)

    def prefill_s(self, tokens: int) -> float:
        """Forecast time from a prefill's start to its first token."""
        return self.step_s + tokens / self.prefill_tok_s

    def observe_prefill(self, tokens: int, seconds: float) -> None:
        if tokens > 0 and seconds > 0:
            rate = min(max(tokens / seconds, self.ewma_tok_s / 4), self.ewma_tok_s * 4)
            self.ewma_tok_s += self.alpha * (rate - self.ewma_tok_s)
            self.samples += 1
            if len(self.fit) >= self.fit_min_samples:   # a stall or a batched step counts as at most ×10 off
                forecast_s = self.prefill_s(tokens)
                seconds = min(max(seconds, forecast_s / 10), forecast_s * 10)
            self.fit.append((tokens, seconds))
            self._refit()

    def restore(self, values: dict, samples: list[tuple[int, float]] | None) -> None:
        """Set measured `values` (an A/B run switching modes on one engine) and, given them, the line's
        `samples` ([prompt tokens, seconds], positive), fitted again."""
        for key, value in values.items():
            setattr(self, key, value)
        self.ewma_tok_s = values.get("prefill_tok_s", self.ewma_tok_s)
        if samples is not None:
            self.fit.clear()
            self.fit.extend((int(t), float(x)) for t, x in samples if t > 0 and x > 0)
            self._refit()

    def _refit(self) -> None:
        self.step_s, self.prefill_tok_s = self._line() or (0.0, self.ewma_tok_s)

    def _line(self) -> tuple[float, float] | None:
        """(step, tokens/s) of the least-squares line through the last samples; None while too few."""
        n = len(self.fit)
        if n < self.fit_min_samples:
            return None
        mean_t = sum(t for t, _ in self.fit) / n
        mean_s = sum(x for _, x in self.fit) / n
        var = sum((t - mean_t) ** 2 for t, _ in self.fit)
        cov = sum((t - mean_t) * (x - mean_s) for t, x in self.fit)
        slope = cov / var if var > 0 else 0.0
        step = mean_s - slope * mean_t
        if slope <= 0 or step < 0:       # all one length, or no step: the window's tokens/s (step 0)
            return 0.0, mean_t / mean_s
        return min(step, self.step_max_s), 1.0 / slope

    def observe_decode(self, tokens: int, seconds: float) -> None:
        if tokens > 0 and seconds > 0:
            rate = min(max(tokens / seconds, self.decode_tok_s / 4), self.decode_tok_s * 4)
            self.decode_tok_s += self.alpha * (rate - self.decode_tok_s)

    def observe_output(self, tokens: int, max_tokens: int) -> None:
        """A request generated `tokens` of its `max_tokens` before it stopped by itself (stop or length)."""
        if tokens > 0 and max_tokens > 0:
            self.output_fill += self.alpha * (min(1.0, tokens / max_tokens) - self.output_fill)


@dataclass
class Lateness:
    """How much later first tokens come than forecast: a high quantile of actual ÷ forecast time to first
    token over the last `window` admitted normal requests (what the rate model misses: a prefill sharing
    the cores with decoding sequences, batching, the prefix cache). 1 until `min_samples`, then clamped to
    `factor_range`."""
    window: int = 64
    quantile: float = 0.9
    min_samples: int = 8
    factor_range: tuple[float, float] = (0.5, 4.0)
    floor_s: float = 0.01            # forecasts shorter than this count as this (a ratio of ~0 says nothing)
    ratios: deque = field(init=False)
    factor: float = 1.0

    def __post_init__(self) -> None:
        self.ratios = deque(maxlen=self.window)

    def observe(self, actual_s: float, forecast_s: float) -> None:
        self.ratios.append(max(actual_s, 0.0) / max(forecast_s, self.floor_s))
        if len(self.ratios) >= self.min_samples:
            ranked = sorted(self.ratios)
            q = ranked[min(len(ranked) - 1, int(self.quantile * len(ranked)))]
            low, high = self.factor_range
            self.factor = min(max(q, low), high)
