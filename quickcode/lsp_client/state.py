"""What the language server learns about its user — the acceptance predictor's weights and the learnt pauses —
kept across editor sessions in the client's `state_dir` (the server restarts with the editor)."""
from __future__ import annotations

import logging
from pathlib import Path

from quickcode.lsp_client.debounce import AdaptiveDebounce
from quickcode.lsp_client.predictor import AcceptancePredictor

log = logging.getLogger("quickcode.session")
SAVE_EVERY = 20     # outcomes learnt between saves


class LearntState:
    def __init__(self, predictor: AcceptancePredictor, debounce: AdaptiveDebounce, state_dir: str = ""):
        self.predictor, self.debounce, self.state_dir = predictor, debounce, state_dir

    def _path(self, name: str) -> Path | None:
        return Path(self.state_dir).expanduser() / name if self.state_dir else None

    def load(self, state_dir: str) -> None:
        self.state_dir = state_dir
        if self._path("predictor.json") is not None:
            self.predictor.load(self._path("predictor.json"))
            self.debounce.load(self._path("pauses.json"))

    def save(self) -> None:
        path = self._path("predictor.json")
        if path is None:
            return
        try:
            if self.predictor.updates:
                self.predictor.save(path)
            if self.debounce.gaps:
                self.debounce.save(self._path("pauses.json"))
        except OSError as e:
            log.warning("could not save the client's state to %s: %s", path.parent, e)

    def learn(self, x: list[float], accepted: bool, now_s: float) -> None:
        """An outcome (accepted or dismissed) teaches the predictor; saved every SAVE_EVERY outcomes."""
        self.predictor.learn(x, accepted, now_s)
        if self.predictor.updates % SAVE_EVERY == 0:
            self.save()
