"""A cheap acceptance predictor: skip requests whose completion would likely be dismissed.

Online logistic regression over a handful of features of the moment (last outcome and how long ago, the
kind of place before the cursor (places.py), position in the line, language), trained by the telemetry (accepted → 1,
dismissed → 0). A request is skipped where its predicted acceptance is below `min_ratio` × this user's own
acceptance rate so far: the bar is relative, so a weak model (or a user who rarely takes suggestions) loses the
places that are much worse than usual, not every suggestion — an absolute bar above a model's usual rate would
silence it everywhere and leave only the explorations to learn from. With probability `exploration` a request
is made anyway, so the model keeps learning about the cases it would skip. Starts neutral (p = 0.5, rate 0.5):
nothing is skipped until it has learnt.
"""
from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path

from quickcode.lsp_client.places import CHAR_CLASSES, place_of
from quickcode.lsp_client.statefile import write_private

_LANGS = ("python", "javascript", "typescript", "other")


def features(last_outcome: int | None, since_last_s: float, line_prefix: str, line_suffix: str,
             language: str) -> list[float]:
    """[bias, last accepted, last dismissed, recency, char class one-hot..., line start, mid-line, lang one-hot...]"""
    cls = place_of(line_prefix).char_class
    lang = language if language in _LANGS else "other"
    return [1.0, float(last_outcome == 1), float(last_outcome == 0), math.exp(-since_last_s / 10.0),
            *[float(cls == c) for c in CHAR_CLASSES], float(not line_prefix.strip()), float(bool(line_suffix.strip())),
            *[float(lang == x) for x in _LANGS]]


@dataclass
class AcceptancePredictor:
    min_ratio: float = 0.5           # ask where p(accept) ≥ this × the user's acceptance rate
    exploration: float = 0.1
    lr: float = 0.1
    weights: list[float] = field(default_factory=lambda: [0.0] * (4 + len(CHAR_CLASSES) + 2 + len(_LANGS)))
    updates: int = 0
    accepted: int = 0
    skipped: int = 0
    last_outcome: int | None = None
    last_outcome_s: float = -1e9

    def probability(self, x: list[float]) -> float:
        z = sum(w * v for w, v in zip(self.weights, x))
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def rate(self) -> float:
        """This user's acceptance rate so far (Laplace-smoothed: 0.5 before any outcome)."""
        return (self.accepted + 1) / (self.updates + 2)

    def should_request(self, x: list[float], rng=random.random) -> bool:
        if self.probability(x) >= self.min_ratio * self.rate() or rng() < self.exploration:
            return True
        self.skipped += 1
        return False

    def features_at(self, ctx, language: str, now_s: float) -> list[float]:
        """`features` of a request at `ctx` (its line_prefix, line_suffix) at `now_s`."""
        return features(self.last_outcome, now_s - self.last_outcome_s, ctx.line_prefix, ctx.line_suffix, language)

    def learn(self, x: list[float], accepted: bool, now_s: float) -> None:
        err = float(accepted) - self.probability(x)
        self.weights = [w + self.lr * err * v for w, v in zip(self.weights, x)]
        self.updates += 1
        self.accepted += int(accepted)
        self.last_outcome, self.last_outcome_s = int(accepted), now_s

    def save(self, path: Path) -> None:
        """Weights persist across editor sessions (the language server restarts with the editor)."""
        write_private(path, json.dumps({"version": 1, "weights": self.weights, "updates": self.updates,
                                        "accepted": self.accepted}))

    def load(self, path: Path) -> bool:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return False
        w = data.get("weights")
        if data.get("version") == 1 and isinstance(w, list) and len(w) == len(self.weights):
            self.weights = [float(x) for x in w]
            self.updates = int(data.get("updates", 0))
            self.accepted = min(self.updates, int(data.get("accepted", 0)))
            return True
        return False
