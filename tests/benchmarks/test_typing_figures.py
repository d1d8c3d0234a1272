"""The typing benchmark's figures and loss attribution, on hand-written session records."""
import math
import os

from quickcode.benchmarks import typing_figures as tf

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

    from quickcode.benchmarks import typing as ty

    for name in [n for n in os.environ if n.startswith("QUICKCODE_")]:   # the developer's shell's own
        monkeypatch.delenv(name)
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
    assert list(ty._load_rows(rows, key)) == [(1, "ours", "whole")]


def test_a_place_where_ours_showed_right_words_is_declined_for_the_word_developer_only():
    """The baseline took 'return self.width' at 4; ours showed 'return self.height' there and took nothing: the
    whole developer could not take it (wrong text), the word developer could ('return self.') and the coin
    said no."""
    base = rec(accepts=[{"at": 4, "text": "return self.width"}])
    ours = rec(shows=[show(4, "return self.height")])
    assert tf.attribute(base, ours, TARGET)[0]["cause"] == "shown_other"
    assert tf.attribute(base, ours, TARGET, "whole")[0]["cause"] == "shown_other"
    assert tf.attribute(base, ours, TARGET, "word")[0]["cause"] == "shown_declined"
    wrong_word = rec(shows=[show(4, "retort self.width")])
    assert tf.attribute(base, wrong_word, TARGET, "word")[0]["cause"] == "shown_other"


def test_partial_accepts_are_counted_apart_and_within_the_accepted_characters():
    r = rec(accepts=[{"at": 4, "text": "return self.", "partial": True},
                     {"at": 26, "text": "x = 1", "partial": False},
                     {"at": 32, "text": "\n"}])                   # a row kept before there were kinds: whole
    s = tf.summarize([tf.session_figures(r)])
    assert (s["accepted"], s["accepted_chars"], s["partial"], s["partial_chars"]) == (3, 18, 1, 12)


def test_keystrokes_saved_are_the_accepted_characters_less_the_keys_that_took_them():
    """A whole line is one Tab; taking `return self.` word by word is four presses (VS Code's steps: `return`,
    ` `, `self`, `.`)."""
    from quickcode.benchmarks.accept_rule import accept_steps

    assert len(accept_steps("return self.width", 12)) == 4
    line = rec(accepts=[{"at": 4, "text": "return self.width", "partial": False, "keys": 1}])
    words = rec(accepts=[{"at": 4, "text": "return self.", "partial": True, "keys": 4}])
    old = rec(accepts=[{"at": 4, "text": "return self."}])        # a row kept before keys: one Tab
    figs = {a: tf.summarize([tf.session_figures(r)]) for a, r in (("line", line), ("words", words), ("old", old))}
    assert (figs["line"]["keys_saved"], figs["words"]["keys_saved"], figs["old"]["keys_saved"]) == (16, 8, 11)
    assert figs["line"]["keys_saved_per_100"] == 100 * 16 / len(TARGET)
    con = tf.contrasts({"ours": figs["line"], "words": figs["words"]})
    assert con["keys_saved_ratio_vs_words"] == 16 / 8


def test_rows_of_the_two_developer_kinds_are_kept_apart_and_older_rows_are_the_whole_developers(tmp_path):
    import json

    from quickcode.benchmarks import typing as ty

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"code": "c", "session": 0, "arm": "ours", **kw}) + "\n"
                            for kw in ({}, {"developer": "word"}, {"developer": "word", "code": "other"})))
    assert sorted(ty._load_rows(rows, {"code": "c"})) == [(0, "ours", "whole"), (0, "ours", "word")]


def _row(arm: str, dev: str, session: int, accepts: list[dict]) -> dict:
    engine = {"requests": 10, "prompt_tokens": 100, "cached_tokens": 0, "output_tokens": 20}
    r = rec(accepts=accepts, engine=engine,
            waits=[{"at": 0, "gap_ms": 500, "ghost_ms": 100.0 + session}])
    return {**r, "arm": arm, "developer": dev, "session": session, "file": "textwrap.py", "target": TARGET}


def test_the_report_gives_each_developer_kind_its_own_figures_and_keeps_the_whole_developers_on_top(tmp_path):
    import argparse

    from quickcode.benchmarks import typing as ty

    whole = [{"at": 4, "text": "return self.width"}]
    word = [{"at": 4, "text": "return self.", "partial": True}, {"at": 16, "text": "width"}]
    naive = [{"at": 4, "text": "return"}]
    by_dev = {d: [[_row("ours", d, i, acc), _row("naive", d, i, naive), _row("honest", d, i, naive)]
                  for i in (0, 1)] for d, acc in (("whole", whole), ("word", word))}
    by_dev["word"][1][1] = _row("naive", "word", 1, [{"at": 4, "text": "return self.", "partial": True}])
    args = argparse.Namespace(chars=len(TARGET), speed=1.0, seed=0, out=tmp_path)
    h = ty._report(args, ["ours", "naive", "honest"], by_dev, {"code": "c"})
    assert (h["developer"], h["ours"]["accepted_chars"], h["ours"]["partial_accepts"]) == ("whole", 34, 0)
    assert h["contrasts"]["accepted_ratio_vs_naive"] == round(34 / 12, 3)
    w = h["developer_word"]
    assert (w["segments"], w["ours"]["accepted_chars"], w["ours"]["partial_accepts"]) == (2, 34, 2)
    assert w["naive"]["accepted_chars"] == 6 + 12
    assert w["contrasts"]["accepted_ratio_vs_naive"] == round(34 / 18, 3)
    assert w["loss_causes"]["naive"] == {"kept": 6 + 12} and h["loss_causes"]["naive"] == {"kept": 6 + 6}
    md = next(tmp_path.glob("*.md")).read_text()
    assert "## Developer kinds side by side" in md
    assert "## Where ours lost characters naive accepted (word developer)" in md
    only_word = ty._report(args, ["ours", "naive", "honest"], {"word": by_dev["word"]}, {"code": "c"})
    assert only_word["developer"] == "word" and only_word["ours"]["partial_accepts"] == 2
