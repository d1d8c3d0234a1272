"""Adaptive debounce with virtual time (milliseconds passed in)."""
from quickcode.lsp_client.debounce import AdaptiveDebounce


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


# ── learnt per place (virtual time: the keystrokes' times are given)


def _type(d: AdaptiveDebounce, gaps_by_place: dict[str, list[float]]) -> None:
    """Keystrokes whose following gap is each of the given gaps, leaving the cursor at that place."""
    t = 0.0
    for where, gaps in gaps_by_place.items():
        for g in gaps:
            d.keystroke(t, where)
            t += g
    d.keystroke(t, None)


def test_a_gap_is_learnt_under_the_place_the_key_left_the_cursor_at():
    d = AdaptiveDebounce()
    d.keystroke(0, "word")
    d.keystroke(120, "open")
    d.keystroke(900, "word")
    assert list(d.gaps["word"]) == [120] and list(d.gaps["open"]) == [780]


def test_where_the_user_stops_to_read_it_asks_at_once():
    d = AdaptiveDebounce(min_ms=0)
    _type(d, {"open": [700 + 10 * i for i in range(20)]})   # after "(" this user always pauses ≥ 700 ms
    d.shown_after(250)
    assert d.delay_ms(pause_point=True, where="open") == 0


def test_mid_word_it_waits_past_the_longest_ordinary_gap():
    d = AdaptiveDebounce(min_ms=0)
    gaps = [80 + 5 * i for i in range(25)]                   # 80..200 ms between letters, never a pause
    _type(d, {"word": gaps})
    d.shown_after(150)
    assert d.delay_ms(where="word") == max(gaps)             # asking earlier would be typed over: wasted


def test_a_place_that_is_no_pause_still_asks_once_the_gap_outlasts_the_cap():
    """The longest ordinary gap can be long (a slow key, a typo fixed): waiting past it asked too late or never,
    and the pause where a simple client's text was accepted went empty (bench typing)."""
    d = AdaptiveDebounce(min_ms=0, wait_cap_ms=200)
    _type(d, {"word": [80 + 5 * i for i in range(30)] + [900]})   # ... and once the user stopped
    d.shown_after(150)
    assert d.delay_ms(where="word") == 200


def test_a_place_with_mixed_pauses_waits_until_the_long_ones_are_likely():
    d = AdaptiveDebounce(min_ms=0, min_chance=0.9)
    short, long_ = [100] * 30, [1200] * 30                    # after "." half the time a quick key, half a pause
    _type(d, {"dot": short + long_})
    d.shown_after(300)
    assert d.delay_ms(where="dot") == 100                    # once past the quick keys, the pause is a real one


def test_a_slower_backend_waits_for_longer_pauses():
    gaps = [100] * 30 + [1200] * 30                          # a quick key or a long pause
    fast, slow = AdaptiveDebounce(min_ms=0), AdaptiveDebounce(min_ms=0)
    for d, show in ((fast, 50), (slow, 400)):
        _type(d, {"sep": gaps})
        d.shown_after(show)
    assert fast.delay_ms(where="sep") == 0 and slow.delay_ms(where="sep") == 100


def test_when_waiting_would_not_make_the_text_likely_it_asks_where_the_odds_are_best():
    # pauses after "," of 200..980 ms and text that takes 400 ms: no wait reaches 90 %, and waiting only lowers
    # the odds; it asks at once (75 % shown in time) rather than at the far end of the user's pauses
    d = AdaptiveDebounce(min_ms=0)
    _type(d, {"sep": [200 + 20 * i for i in range(40)]})
    d.shown_after(400)
    assert d.delay_ms(where="sep") == 0
    hopeless = AdaptiveDebounce(min_ms=0)                    # ... unless the odds are poor everywhere: then
    _type(hopeless, {"sep": [150 + 5 * i for i in range(40)]})   # past the longest gap, capped (a gap that long
    hopeless.shown_after(400)                                     # here is the user stopping)
    assert hopeless.delay_ms(where="sep") == 200
    uncapped = AdaptiveDebounce(min_ms=0, wait_cap_ms=1000)
    _type(uncapped, {"sep": [150 + 5 * i for i in range(40)]})
    uncapped.shown_after(400)
    assert uncapped.delay_ms(where="sep") == 345


def test_little_history_falls_back_to_the_rhythm_rule():
    d = AdaptiveDebounce(base_ms=50, min_samples=12)
    _type(d, {"word": [100] * 5})
    assert d.delay_ms(where="word") == d.delay_ms()
    assert d.delay_ms(pause_point=True, where="open") == d.min_ms


def test_learning_can_be_turned_off_and_the_baseline_stays_fixed():
    d = AdaptiveDebounce(learn_pauses=False, min_ms=0)
    _type(d, {"word": [100] * 40})
    assert d.delay_ms(where="word") == d.delay_ms()
    fixed = AdaptiveDebounce(base_ms=75, adaptive=False)
    _type(fixed, {"word": [100] * 40})
    assert fixed.delay_ms(where="word") == 75


def test_the_learnt_pauses_outlive_the_editor_session(tmp_path):
    import random

    from quickcode.lsp_client.clock import VirtualClock
    from quickcode.lsp_client.config import ClientConfig
    from quickcode.lsp_client.session import Session
    from tests.lsp_client.test_session_property import FakeChannel

    cfg = ClientConfig(state_dir=str(tmp_path), predictor=False)
    c = Session(cfg, FakeChannel(random.Random(0)), clock=VirtualClock())
    for i in range(20):                          # a user who stops ~600 ms at every fresh line
        c.debounce.keystroke(i * 1000.0, "line")
        c.debounce.keystroke(i * 1000.0 + 600, "word")
    c.debounce.shown_after(120.0)
    before = c.debounce.delay_ms(where="line")
    c.save_state()
    again = Session(cfg, FakeChannel(random.Random(0)), clock=VirtualClock())
    assert again.debounce.gaps["line"] == c.debounce.gaps["line"] and again.debounce.show_ms == 120.0
    assert again.debounce.delay_ms(where="line") == before
    (tmp_path / "pauses.json").write_text('{"version": 1, "gaps_ms": {"line": ["x"]}}')
    assert Session(cfg, FakeChannel(random.Random(0))).debounce.gaps == {}   # unreadable: ignored


def test_text_that_must_be_read_before_the_next_key_is_not_asked_for_between_fast_keys():
    """Between the keys of a string literal (its quotes, operators) the text is in time at wait 0 for 92 % of the
    gaps if a glimpse counts; on screen 100 ms before the next key (`read_ms`) no wait makes it likely, so it waits
    the cap (bench typing: ~86 such requests, 0 characters accepted). Where people stop it still asks at once."""
    fast = [50.0 + 4 * i for i in range(5)] + [100.0 + 3 * i for i in range(59)]     # 59/64 longer than 80 ms
    stops = [300.0 + 10 * i for i in range(40)]
    glimpse, read = AdaptiveDebounce(min_ms=0), AdaptiveDebounce(min_ms=0, read_ms=100)
    for d in (glimpse, read):
        _type(d, {"other": fast, "sep": stops})
        d.shown_after(80)
    assert glimpse.delay_ms(where="other") == 0
    assert read.delay_ms(where="other") == 200                  # the cap: a gap this long is the user stopping
    assert glimpse.delay_ms(where="sep") == read.delay_ms(where="sep") == 0


def test_the_settings_reach_the_debounce():
    from quickcode.lsp_client.config import ClientConfig
    d = AdaptiveDebounce()
    d.configure(ClientConfig(pause_read_ms=120, pause_wait_cap_ms=150, pause_min_chance=0.8))
    assert (d.read_ms, d.wait_cap_ms, d.min_chance) == (120, 150, 0.8)
