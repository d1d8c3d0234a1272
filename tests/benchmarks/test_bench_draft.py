"""`quickcode bench draft`'s comparison against plain decoding: paired by prompt, intervals by resampling."""
from quickcode.benchmarks.draft import paired_vs_plain


def _reqs(ttft_ms, e2e_ms):
    return [{"ttft_s": t / 1000, "e2e_s": e / 1000} for t, e in zip(ttft_ms, e2e_ms)]


def test_a_slower_first_token_and_the_speed_up_come_with_intervals_that_hold_them():
    plain = _reqs([20, 30, 25, 40, 22, 28], [200, 210, 190, 260, 230, 205])
    arm = _reqs([27, 37, 32, 47, 29, 35], [100, 105, 95, 130, 115, 102.5])   # +7 ms first token, twice as fast
    p = paired_vs_plain(plain, arm, draws=500)
    assert p["ttft_plus_ms"] == 7.0 and p["ttft_plus_ms_90"] == [7.0, 7.0]
    assert p["speedup"] == 2.0 and p["speedup_90"][0] <= 2.0 <= p["speedup_90"][1]


def test_the_difference_is_paired_by_prompt_not_a_difference_of_medians():
    plain = _reqs([10, 50, 90], [50] * 3)
    arm = _reqs([90, 10, 50], [50] * 3)       # the same medians (50): per prompt +80, -40, -40
    assert paired_vs_plain(plain, arm, draws=200)["ttft_plus_ms"] == -40.0


def _tok():
    from quickcode.draft_model import tokenizer as tokmod
    from quickcode.backend.assets import models_dir

    return tokmod.load(models_dir() / "target")


def test_a_unit_counts_the_tokens_to_the_end_of_its_word_and_its_line():
    from quickcode.benchmarks.draft import unit_tokens

    tok = _tok()
    ids = tok.encode("total = sum(values)\n    return total / len(values)\n").ids
    n = unit_tokens(tok, ids)
    text = tok.decode(ids[: n["word"]])
    assert text.strip() == "total" and tok.decode(ids[: n["word"] - 1]).strip() != "total"
    line = tok.decode(ids[: n["line"]])        # the line break's token may carry the next line's indentation
    assert "\n" in line and "\n" not in tok.decode(ids[: n["line"] - 1]) and "return" not in line
    assert n["block"] == len(ids) and n["word"] < n["line"] < n["block"]


def test_a_units_time_is_when_the_output_holding_its_last_token_arrived():
    from quickcode.benchmarks.draft import time_to

    req = {"streamed_steps": [1, 3, 1, 4], "step_s": [0.05, 0.09, 0.12, 0.2], "e2e_s": 0.2}
    assert time_to(req, 1) == 0.05 and time_to(req, 2) == 0.09 and time_to(req, 4) == 0.09
    assert time_to(req, 5) == 0.12 and time_to(req, 9) == 0.2 and time_to(req, 50) == 0.2
