"""When to ask the backend, after the last keystroke: adaptive debounce, learnt per kind of place.

Without history: delay = clamp(max(base, rhythm × typical gap between keys) − latency_weight × backend
latency, min, max): a fast typist mid-burst is not interrupted, a slow backend is compensated (as Tabby's agent
does), and at a likely pause point (`places.Place.pause`) the wait is the minimum.

With history (`learn_pauses`): the user's recent gaps between keys are kept per kind of place the cursor was
left at (a fresh line, after `(` or `.`, after a space, mid-word...: `places.Place.kind`). A request asked at such a place
is only worth making if the pause lasts until its ghost text can be shown (`show_ms`, measured: request sent →
the text to show is final); otherwise its tokens are generated for nobody. So the wait is the shortest w for
which, among this place's past gaps longer than w, at least `min_chance` lasted w + show_ms, or for which
none of them was longer than w (the user is past their usual rhythm: a real pause). Only waits up to
`learnt_max_ms` are weighed that way; if none of them reaches `min_chance`, the one with the best chance is taken
when that chance is at least `fallback_chance` (else the longest past gap: this place is no pause). Where
people stop to read (line starts, after an opener) that is no wait at all; mid-word it is a little more than
the user's slowest ordinary keystroke. With `read_ms`, text counts as in time only if it is on screen that long
before the next key (time to read it): at places where keys follow each other fast (a string literal's quotes
and operators, where text shown at once was in time but never accepted) no wait is then likely enough and it
waits the cap. No learnt wait exceeds `wait_cap_ms`: a place that is "no pause" still asks once the gap
outlasts it — at such a place that gap is the user stopping, and waiting for the longest past gap asked too
late or never (docs/decisions.md#pause-wait-cap). What is learnt (`save`/`load`) is kept across editor
sessions in the client's state_dir. Time is passed in by the caller (virtual in tests).
"""
from __future__ import annotations

import bisect
import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from quickcode.lsp_client.statefile import write_private


@dataclass
class AdaptiveDebounce:
    base_ms: float = 50.0
    min_ms: float = 0.0
    max_ms: float = 1000.0
    adaptive: bool = True
    rhythm: float = 1.3              # wait this multiple of the user's usual gap between keys
    latency_weight: float = 0.5
    alpha: float = 0.2               # EWMA weight of a new observation
    pause_gap_ms: float = 1500.0     # gaps longer than this are pauses, not typing rhythm
    learn_pauses: bool = True
    min_chance: float = 0.9          # ask once the pause lasts until the text can be shown this often
    samples: int = 64                # gaps kept per place
    min_samples: int = 12            # below this many at a place, the rhythm rule above decides
    tail_min: int = 1                # fewer past gaps than this longer than the wait: it is a real pause
    learnt_max_ms: float = 400.0     # waits the learnt rule considers; past this the latency costs too much
    fallback_chance: float = 0.5     # ... and if none reaches min_chance, the best of them if at least this
    wait_cap_ms: float = 200.0       # a learnt wait never exceeds this: a gap this long is the user stopping
    read_ms: float = 0.0             # text is in time if on screen this long before the next key
    gap_ms: float | None = None      # EWMA of gaps between keystrokes
    latency_ms: float | None = None  # EWMA of backend time to first chunk
    show_ms: float | None = None     # EWMA of request sent → the text to show is final
    last_key_ms: float | None = None
    last_place: str | None = None
    gaps: dict[str, deque] = field(default_factory=dict)

    def keystroke(self, now_ms: float, place_after: str | None = None) -> None:
        """A key at `now_ms`, leaving the cursor at a place of kind `place_after` (None: not known)."""
        if self.last_key_ms is not None:
            gap = now_ms - self.last_key_ms
            if 0 < gap < self.pause_gap_ms:
                self.gap_ms = gap if self.gap_ms is None else self.gap_ms + self.alpha * (gap - self.gap_ms)
            if gap > 0 and self.last_place is not None:
                q = self.gaps.get(self.last_place)
                if q is None:
                    q = self.gaps[self.last_place] = deque(maxlen=self.samples)
                q.append(min(gap, 10 * self.pause_gap_ms))
        self.last_key_ms = now_ms
        self.last_place = place_after

    def save(self, path: Path) -> None:
        """What is learnt about this user, kept across editor sessions (a typing rhythm outlives one)."""
        write_private(path, json.dumps({"version": 1, "show_ms": self.show_ms,
                                        "gaps_ms": {k: [round(g, 1) for g in q] for k, q in self.gaps.items()}}))

    def load(self, path: Path) -> bool:
        """Restore what `save` wrote; a missing or unreadable file leaves nothing learnt."""
        try:
            state = json.loads(path.read_text())
            gaps, show = state.get("gaps_ms"), state.get("show_ms")
            if state.get("version") != 1 or not isinstance(gaps, dict):
                return False
            self.gaps = {str(k): deque((float(g) for g in v if float(g) > 0), maxlen=self.samples)
                         for k, v in gaps.items()}
            self.show_ms = float(show) if show is not None else None
        except (OSError, ValueError, TypeError, AttributeError):
            self.gaps, self.show_ms = {}, None
            return False
        return True

    def configure(self, cfg) -> None:
        """Take the client's settings (config.ClientConfig)."""
        self.base_ms, self.min_ms, self.max_ms = cfg.debounce_ms, cfg.debounce_min_ms, cfg.debounce_max_ms
        self.adaptive, self.learn_pauses = cfg.adaptive_debounce, cfg.learn_pauses
        self.min_chance, self.wait_cap_ms, self.read_ms = cfg.pause_min_chance, cfg.pause_wait_cap_ms, cfg.pause_read_ms

    def latency(self, ms: float) -> None:
        self.latency_ms = ms if self.latency_ms is None else self.latency_ms + self.alpha * (ms - self.latency_ms)

    def shown_after(self, ms: float) -> None:
        """A request's text to show was final `ms` after it was sent."""
        self.show_ms = ms if self.show_ms is None else self.show_ms + self.alpha * (ms - self.show_ms)

    def delay_ms(self, pause_point: bool = False, where: str | None = None) -> float:
        if not self.adaptive:
            return self.base_ms
        learnt = self._learnt_ms(where)
        if learnt is not None:
            return min(self.max_ms, self.wait_cap_ms, max(self.min_ms, learnt))
        if pause_point:
            return self.min_ms
        d = max(self.base_ms, self.rhythm * (self.gap_ms or 0.0)) - self.latency_weight * (self.latency_ms or 0.0)
        return min(self.max_ms, max(self.min_ms, d))

    def _learnt_ms(self, where: str | None) -> float | None:
        """The shortest wait after which the pause likely outlasts show_ms (None: not enough history)."""
        q = self.gaps.get(where) if (self.learn_pauses and where) else None
        if q is None or len(q) < self.min_samples:
            return None
        xs = sorted(q)
        show = (self.show_ms if self.show_ms is not None else (self.latency_ms or 0.0)) + self.read_ms
        best_w, best = xs[-1], -1.0
        for w in [0.0, *xs]:
            longer = len(xs) - bisect.bisect_right(xs, w)                # past gaps longer than w
            if longer < self.tail_min:
                return w
            chance = (len(xs) - bisect.bisect_right(xs, w + show)) / longer
            if chance >= self.min_chance:
                return w
            if w > self.learnt_max_ms:
                break
            if chance > best:
                best_w, best = w, chance
        # no short wait makes the text likely in time (a slow backend, pauses about as long as it needs):
        # waiting longer would barely raise the odds and would cost every pause its latency
        return best_w if best >= self.fallback_chance else xs[-1]

    def wait_ms(self, now_ms: float, pause_point: bool = False, where: str | None = None) -> float:
        """What is left to wait now: the delay counts from the last keystroke, so a client that already
        debounced (Neovim asks 200 ms after typing stops) is not made to wait twice."""
        since = now_ms - self.last_key_ms if self.last_key_ms is not None else float("inf")
        return max(0.0, self.delay_ms(pause_point, where) - since)
