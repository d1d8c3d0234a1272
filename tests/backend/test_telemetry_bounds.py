"""Telemetry into metrics: a fixed language set, clamped counts, a per-user rate limit (virtual clock)."""
from __future__ import annotations

from quickcode.backend import metrics
from quickcode.backend.telemetry import MAX_COMPLETION_CHARS, TelemetryRecorder
from quickcode.protocol import Telemetry, TelemetryEvent
from quickcode.protocol.languages import KNOWN_LANGUAGE_IDS, language_label


def test_language_labels_come_from_a_fixed_set():
    assert language_label("python") == "python" and language_label("Rust") == "rust"
    assert language_label("typescriptreact") == "typescriptreact" and language_label("") == "unknown"
    for junk in ("pyth0n", "x" * 10_000, 'a"b', "python\n", "../../etc"):
        assert language_label(junk) in KNOWN_LANGUAGE_IDS | {"other", "unknown"}
    assert language_label("pyth0n") == "other"
    assert metrics.error_label("rate_limited") == "rate_limited" and metrics.error_label("made-up") == "other"


def test_counts_are_clamped_and_each_user_is_rate_limited():
    now = [0.0]
    rec = TelemetryRecorder(rate_per_s=2.0, burst=3, clock=lambda: now[0])
    shown0 = metrics.SHOWN_CHARS._value.get()
    dropped0 = metrics.TELEMETRY_DROPPED._value.get()
    big = Telemetry(event=TelemetryEvent.SHOWN, language="python", shown_chars=10**15)
    assert [rec.record("mallory", big) for _ in range(5)] == [True, True, True, False, False]
    assert rec.record("alice", big)                       # another user's bucket is untouched
    assert metrics.SHOWN_CHARS._value.get() - shown0 == 4 * MAX_COMPLETION_CHARS
    assert metrics.TELEMETRY_DROPPED._value.get() - dropped0 == 2
    now[0] = 1.0                                          # two more frames' worth refilled
    assert [rec.record("mallory", big) for _ in range(3)] == [True, True, False]
    neg = Telemetry(event=TelemetryEvent.ACCEPTED, language="go", accepted_chars=-50)
    acc0 = metrics.ACCEPTED_CHARS._value.get()
    assert rec.record("bob", neg) and metrics.ACCEPTED_CHARS._value.get() == acc0
