"""The one percentile (quickcode/protocol/stats.py) is numpy's default (linear) method, pure Python."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest

from quickcode.protocol.stats import percentile


@pytest.mark.parametrize("n", [1, 2, 3, 10, 101])
def test_the_percentile_is_numpys_linear_one(n):
    rng = random.Random(n)
    xs = [rng.uniform(-5, 50) for _ in range(n)]
    for q in (0, 2.5, 5, 25, 50, 90, 95, 97.5, 99, 100):
        assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)), rel=1e-12, abs=1e-12)


def test_no_values_give_the_empty_value():
    assert math.isnan(percentile([], 50))
    assert percentile(iter(()), 95, empty=0.0) == 0.0
    assert percentile((x for x in (3.0, 1.0, 2.0)), 50) == 2.0         # any iterable, unsorted
