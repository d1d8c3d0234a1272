"""The copy model of `quickcode bench copy` (pure logic): the longest earlier n-gram decides, and the mixture
keeps a distribution."""
from __future__ import annotations

import torch

from benchmarks.copy_mix import copy_distribution, mix


def test_the_longest_earlier_ngram_decides():
    #        0  1  2  3  4  5  6  7  8
    ctx = [5, 6, 7, 9, 6, 7, 8, 5, 6, 7]
    # "5 6 7" occurred once before (followed by 9); "6 7" twice (9, 8): the longest match wins
    assert copy_distribution(ctx, frozenset()) == (3, {9: 1.0})
    assert copy_distribution(ctx, frozenset(), max_n=2) == (2, {9: 0.5, 8: 0.5})
    assert copy_distribution([1, 2, 3], frozenset()) == (0, {})
    # an excluded follower (a FIM token, end of text) never counts
    assert copy_distribution([4, 0, 4], frozenset({0})) == (0, {})


def test_the_mixture_is_a_distribution_and_off_without_a_match():
    p = torch.tensor([0.5, 0.3, 0.2])
    assert torch.equal(mix(p, 0, {}, (0.5,)), p)
    q = mix(p.clone(), 2, {2: 1.0}, (0.1, 0.6))
    assert torch.allclose(q, torch.tensor([0.2, 0.12, 0.68])) and abs(float(q.sum()) - 1) < 1e-6
