"""Adaptive debounce with virtual time (milliseconds passed in)."""
from lsp_client.debounce import AdaptiveDebounce


def test_fixed_base_when_not_adaptive():
    d = AdaptiveDebounce(base_ms=50, adaptive=False)
    assert d.delay_ms() == 50


def test_waits_longer_for_a_slow_steady_typist_than_the_base():
    d = AdaptiveDebounce(base_ms=50, rhythm=1.3)
    for t in range(0, 2000, 200):          # a key every 200 ms
        d.keystroke(t)
    assert 250 <= d.delay_ms() <= 262


def test_fast_bursts_keep_the_base_pause():
    d = AdaptiveDebounce(base_ms=50)
    for t in range(0, 600, 30):
        d.keystroke(t)
    assert d.delay_ms() == 50


def test_long_pauses_do_not_count_as_rhythm():
    d = AdaptiveDebounce(base_ms=50)
    d.keystroke(0)
    d.keystroke(5000)
    assert d.gap_ms is None


def test_backend_latency_is_subtracted_and_clamped():
    d = AdaptiveDebounce(base_ms=50, latency_weight=0.5, min_ms=10)
    for t in range(0, 2000, 200):
        d.keystroke(t)
    d.latency(200)
    assert 150 <= d.delay_ms() <= 162
    d.latency(10_000)
    assert d.delay_ms() >= 10


def test_pause_points_take_the_minimum():
    d = AdaptiveDebounce(base_ms=80, min_ms=0)
    assert d.delay_ms(pause_point=True) == 0


def test_wait_counts_from_the_last_keystroke():
    d = AdaptiveDebounce(base_ms=100, adaptive=False)
    d.keystroke(1000)
    assert d.wait_ms(1030) == 70
    assert d.wait_ms(1300) == 0     # the editor already waited (Neovim asks 200 ms after typing stops)
