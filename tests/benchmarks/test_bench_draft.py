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
