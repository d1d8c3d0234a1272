"""The typing benchmark's figures and loss attribution, on hand-written session records."""
import math

from benchmarks import typing_figures as tf

TARGET = "    return self.width\n    x = 1\n"


def rec(accepts=(), shows=(), asks=(), waits=(), **kw):
    r = {"accepts": list(accepts), "shows": list(shows), "asks": list(asks), "waits": list(waits),
         "segment_chars": len(TARGET), "accepted_chars": sum(len(a["text"]) for a in accepts),
         "accepted": len(accepts), "keystrokes": 20, "engine": None}
    r.update(kw)
    return r


def show(at, text, rid="r1", typed=0, version=1, t=0.0):
    return {"at": at, "text": text, "id": rid if not typed else f"{rid}+{typed}", "version": version, "t_ms": t}


def test_a_suggestion_typed_through_is_one_distinct_suggestion_and_its_text_is_counted_once():
    shows = [show(4, "return self.width", version=1, t=1), show(5, "eturn self.width", typed=1, version=2, t=2),
             show(6, "turn self.width", typed=2, version=3, t=3)]
    assert tf.shown_chars_by_request(shows) == {"r1": "return self.width"}
    assert tf.distinct_suggestions(shows) == (1, 0)


def test_the_next_line_served_later_from_the_same_request_counts_as_served_without_asking():
    shows = [show(4, "return self.width", version=1, t=1), show(26, "x = 1", typed=20, version=5, t=9),
             show(4, "return self.w", rid="r2", version=1, t=0.5)]
    assert tf.distinct_suggestions(shows) == (3, 1)
    assert tf.shown_chars_by_request(shows)["r1"] == "return self.widthx = 1"


def test_attribution_tells_kept_shorter_covered_and_lost_places_apart():
    base = rec(accepts=[{"at": 4, "text": "return self.width"}, {"at": 26, "text": "x = 1"}])
    ours = rec(accepts=[{"at": 4, "text": "return self"}], shows=[], asks=[{"at": 26, "outcome": "cancelled"}])
    got = tf.attribute(base, ours, TARGET)
    assert [(x["cause"], x["chars"], x["ours_chars"]) for x in got] == [("kept_shorter", 17, 11), ("no_answer", 5, 0)]
    ours2 = rec(accepts=[{"at": 0, "text": "    return self.width\n    x"}])
    got2 = tf.attribute(base, ours2, TARGET)
    assert [(x["cause"], x["ours_chars"]) for x in got2] == [("covered", 17), ("covered", 1)]
    assert tf.wins(base, ours2) == 4 + 1 + 4        # the indentation, the newline, the next indentation


def test_a_lost_place_is_blamed_on_what_ours_did_there():
    base = rec(accepts=[{"at": 4, "text": "return self.width"}])
    cases = {
        "shown_other": rec(shows=[show(4, "return None")]),
        "shown_longer": rec(shows=[show(4, "return self.width + 1")]),
        "shown_declined": rec(shows=[show(4, "return")]),
        "answer_late": rec(asks=[{"at": 4, "outcome": "late"}]),
        "empty": rec(asks=[{"at": 4, "outcome": "items"}, {"at": 4, "outcome": "empty"}]),
        "not_asked": rec(asks=[{"at": 3, "outcome": "empty"}]),
    }
    for cause, ours in cases.items():
        assert tf.attribute(base, ours, TARGET)[0]["cause"] == cause


def test_waste_is_output_tokens_minus_the_tokens_of_text_shown():
    r = rec(shows=[show(4, "return self.width")], waits=[{"at": 4, "gap_ms": 500, "ghost_ms": 120.0},
                                                          {"at": 5, "gap_ms": 100, "ghost_ms": 30.0}],
            engine={"requests": 3, "prompt_tokens": 900, "cached_tokens": 600, "output_tokens": 40},
            accepts=[{"at": 4, "text": "return self.width"}])
    f = tf.session_figures(r, count_tokens=lambda s: len(s.split()) * 2)     # "return self.width": 4 tokens
    s = tf.summarize([f])
    assert s["waste_share"] == 1 - 4 / 40
    assert s["engine_tokens"] == 300 + 40 and s["engine_tokens_per_accepted_char"] == 340 / 17
    assert s["p50_ms"] == 120.0 and s["pauses"] == 1


def test_intervals_pair_the_arms_and_bracket_the_ratio():
    def arm(chars):
        return [tf.session_figures(rec(accepts=[{"at": 0, "text": "x" * c}], engine={"requests": 10})) for c in chars]
    figs = {"ours": arm([10, 20, 30, 40]), "naive": arm([5, 10, 15, 20])}
    ci = tf.intervals(figs, draws=200)
    assert ci["accepted_ratio_vs_naive"] == [2.0, 2.0]      # paired: every draw has the same ratio
    assert ci["fewer_requests_vs_naive"] == [0.0, 0.0]
    assert math.isnan(ci["p95_minus_naive_ms"][0])           # no pauses: no latency figure


def test_rows_typed_with_other_client_settings_or_backend_environment_are_not_pooled(monkeypatch, tmp_path):
    """--ours-settings and QUICKCODE_* (e.g. the prompt budget) are part of the rows' key: a run continued with
    other settings types its segments again instead of pooling them."""
    import argparse
    import json

    from benchmarks import typing as ty

    monkeypatch.delenv("QUICKCODE_MAX_MODEL_LEN", raising=False)
    plain = argparse.Namespace(ours_settings=None, url=None)
    older = argparse.Namespace(ours_settings={"predictor": True}, url=None)
    assert ty._setting_key(plain) == {}
    monkeypatch.setenv("QUICKCODE_MAX_MODEL_LEN", "2048")
    key = {"code": "c", **ty._setting_key(older)}
    assert key == {"code": "c", "ours_settings": {"predictor": True},
                   "backend_env": {"QUICKCODE_MAX_MODEL_LEN": "2048"}}
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"code": "c", "session": 0, "arm": "ours"}) + "\n"
                    + json.dumps({**key, "session": 1, "arm": "ours"}) + "\n")
    assert list(ty._load_rows(rows, key)) == [(1, "ours")]
