"""What happened to each shown completion: accepted (Tab, or typed through to the end), partially accepted,
or dismissed (the user went elsewhere). Outcomes feed the acceptance predictor and reach the backend as
`telemetry` frames (exported there as metrics)."""
from __future__ import annotations

from dataclasses import dataclass, field

from quickcode.protocol import Telemetry, TelemetryEvent


@dataclass
class Shown:
    id: str
    uri: str
    prefix: str               # prefix window when shown
    text: str
    language: str
    features: list[float]
    shown_s: float
    typed: int = 0            # characters of `text` typed by hand since
    partial: int = 0          # characters of `text` accepted word by word so far (the largest length reported)


@dataclass
class Outcomes:
    send: callable                                  # Telemetry → None (the channel)
    learn: callable                                 # (features, accepted: bool, now_s) → None (the predictor)
    shown: dict[str, Shown] = field(default_factory=dict)      # id → Shown, still on screen (per uri: last only)
    counts: dict[str, int] = field(default_factory=lambda: {e.value: 0 for e in TelemetryEvent})
    accepted_chars: int = 0
    shown_chars: int = 0

    def on_shown(self, s: Shown) -> None:
        for old in [x for x in self.shown.values() if x.uri == s.uri and x.id != s.id]:
            self._end(old, TelemetryEvent.DISMISSED, 0, s.shown_s)
        if s.id in self.shown:
            self.shown[s.id].text = s.text       # the same request again, grown since shown early
            return
        self.shown[s.id] = s
        self.counts["shown"] += 1
        self.shown_chars += len(s.text)
        self.send(Telemetry(event=TelemetryEvent.SHOWN, id=s.id, language=s.language, shown_chars=len(s.text)))

    def on_accepted(self, sid: str, now_s: float, chars: int | None = None) -> Shown | None:
        s = self.shown.get(sid)
        if s is not None:
            self._end(s, TelemetryEvent.ACCEPTED, len(s.text) if chars is None else chars, now_s)
        return s

    def on_edit(self, uri: str, text: str, cursor: int, grew_chars: int, now_s: float) -> Shown | None:
        """An edit that grew the document by more than a keystroke and left `text` before `cursor` ending
        with a shown completion's prefix and whole text accepted it: how clients that run no item command
        accept (eglot inserts the completion-menu item and says nothing more). The completion, or None. A
        client that also runs `quickcode.accept` after the edit finds it accepted already: counted once."""
        if grew_chars < 2:
            return None
        for s in [x for x in self.shown.values() if x.uri == uri]:
            if text.endswith(s.prefix + s.text, 0, cursor):
                self._end(s, TelemetryEvent.ACCEPTED, len(s.text), now_s)
                return s
        return None

    def on_partial(self, sid: str, length: int, now_s: float) -> None:
        """`length`: the characters of the suggestion accepted so far (VS Code reports the running total at each
        accept-next-word; a report that adds nothing — repeated, or shorter — counts nothing)."""
        s = self.shown.get(sid)
        if s is None or length <= s.partial:
            return
        gained, s.partial = min(length, len(s.text)) - s.partial, min(length, len(s.text))
        self.counts["partial"] += 1
        self.accepted_chars += gained
        self.send(Telemetry(event=TelemetryEvent.PARTIAL, id=sid, language=s.language, accepted_chars=gained))

    def on_position(self, uri: str, prefix: str, now_s: float) -> None:
        """A new request at `prefix`: a shown completion the user typed through stays (or is accepted when
        fully typed); one the document moved away from is dismissed."""
        for s in [x for x in self.shown.values() if x.uri == uri]:
            typed = prefix[len(s.prefix):] if prefix.startswith(s.prefix) else None
            if typed is not None and s.text.startswith(typed) and typed:
                s.typed = len(typed)
                if len(typed) == len(s.text):
                    self._end(s, TelemetryEvent.ACCEPTED, len(s.text), now_s)
            elif typed == "":
                continue          # same position asked again: still on screen
            elif typed is not None and typed.startswith(s.text):
                self._end(s, TelemetryEvent.ACCEPTED, len(s.text), now_s)   # accepted, then typed on
            else:
                self._end(s, TelemetryEvent.DISMISSED, 0, now_s)

    def on_closed(self, uri: str, now_s: float) -> None:
        for s in [x for x in self.shown.values() if x.uri == uri]:
            self._end(s, TelemetryEvent.DISMISSED, 0, now_s)

    @property
    def acceptance_rate(self) -> float:
        ended = self.counts["accepted"] + self.counts["dismissed"]
        return self.counts["accepted"] / ended if ended else 0.0

    def _end(self, s: Shown, event: TelemetryEvent, chars: int, now_s: float) -> None:
        self.shown.pop(s.id, None)
        self.counts[event.value] += 1
        if event is TelemetryEvent.ACCEPTED:
            chars = max(0, chars - s.partial)      # the words taken before were counted as they were taken
            self.accepted_chars += chars
        self.learn(s.features, event is TelemetryEvent.ACCEPTED or s.partial > 0, now_s)
        self.send(Telemetry(event=event, id=s.id, language=s.language, shown_chars=len(s.text), accepted_chars=chars))
