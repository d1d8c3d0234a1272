"""The copy model (quickcode/backend/copy_model.py, pure logic; served by backend/vllm_copy.py): the longest
earlier n-gram decides, the mixture is the stated distribution, and bad settings are refused."""
from __future__ import annotations

import random

import pytest
import torch

from quickcode.backend.copy_model import copy_distribution, mix_logits, parse_lambdas


def test_the_longest_earlier_ngram_decides():
    #        0  1  2  3  4  5  6  7  8
    ctx = [5, 6, 7, 9, 6, 7, 8, 5, 6, 7]
    # "5 6 7" occurred once before (followed by 9); "6 7" twice (9, 8): the longest match wins
    assert copy_distribution(ctx, 4) == (3, {9: 1.0})
    assert copy_distribution(ctx, 2) == (2, {9: 0.5, 8: 0.5})
    assert copy_distribution([1, 2, 3], 4) == (0, {})
    # an excluded follower (a FIM token, end of text) never counts
    assert copy_distribution([4, 0, 4], 4, frozenset({0})) == (0, {})


def _scan(ctx: list[int], max_n: int, exclude: frozenset[int]) -> tuple[int, dict[int, float]]:
    """The definition, spelt out: for n from max_n down, every earlier occurrence of the last n tokens."""
    for n in range(min(max_n, len(ctx) - 1), 0, -1):
        counts: dict[int, int] = {}
        for i in range(n, len(ctx)):
            if ctx[i] not in exclude and ctx[i - n:i] == ctx[-n:]:
                counts[ctx[i]] = counts.get(ctx[i], 0) + 1
        if counts:
            return n, {t: c / sum(counts.values()) for t, c in counts.items()}
    return 0, {}


def test_matches_the_definition_on_random_sequences():
    rng = random.Random(0)
    for trial in range(2000):
        ctx = [rng.randrange(5) for _ in range(rng.randrange(1, 50))]
        exclude = frozenset({0}) if trial % 2 else frozenset()
        n, got = copy_distribution(ctx, 4, exclude)
        want_n, want = _scan(ctx, 4, exclude)
        assert n == want_n and got.keys() == want.keys(), ctx
        assert all(abs(got[t] - want[t]) < 1e-12 for t in got)


def test_the_mixture_is_the_stated_distribution_and_off_without_a_match():
    logits = torch.tensor([2.0, 1.0, 0.5, -1.0])
    assert mix_logits(logits, 0, {}, (0.5,)) is logits
    assert mix_logits(logits, 2, {2: 1.0}, ()) is logits
    out = mix_logits(logits, 2, {2: 0.75, 3: 0.25}, (0.1, 0.6))
    want = torch.softmax(logits, -1) * 0.4 + torch.tensor([0, 0, 0.6 * 0.75, 0.6 * 0.25])
    assert torch.allclose(out.exp(), want, atol=1e-6) and abs(float(out.exp().sum()) - 1) < 1e-5
    assert int(out.argmax()) == 2                    # the copied token wins the greedy choice
    assert mix_logits(logits.bfloat16(), 1, {3: 1.0}, (0.5,)).dtype == torch.bfloat16


@pytest.mark.parametrize("text,want", [("", ()), ("0.1,0.2", (0.1, 0.2)), (" 0.3 ", (0.3,))])
def test_lambdas_parse(text, want):
    assert parse_lambdas(text) == want


@pytest.mark.parametrize("text", ["1.0", "-0.1", "0.1,,0.2", "x", ",".join(["0.1"] * 9)])
def test_bad_lambdas_are_refused(text):
    with pytest.raises(ValueError):
        parse_lambdas(text)
