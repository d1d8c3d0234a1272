"""A copy (cache) model of the request's own tokens, mixed into the target's next-token distribution.

Code repeats itself: the identifier defined three lines up, the argument list of the call above, the line of
the previous branch. The copy model predicts the next token from the tokens that followed earlier occurrences
of the longest n-gram (n ≤ `max_n`) that ends the context — the prompt as served (prefix, suffix, neighbour
snippets, FIM tokens) plus what was generated so far; the target's distribution is mixed with it as
p = (1 − λ_n) p_model + λ_n p_copy, λ by the length of the match (issue 14, item 4; measured in
`quickcode bench copy` in PyTorch and `quickcode bench quality --arm copy:copy_lambdas=...` served).

Pure: no vLLM here (quickcode/backend/vllm_logits.py wraps it as a vLLM logits processor).
"""
from __future__ import annotations

import math
from collections import Counter

EXTRA_KEY = "quickcode_copy"     # SamplingParams.extra_args key that turns it on for a request (vllm_copy.py)


def parse_lambdas(text: str) -> tuple[float, ...]:
    """"0.1,0.2,0.3,0.4" → λ for matches of 1, 2, 3, 4 tokens ("" → off). Each in [0, 1)."""
    if not text.strip():
        return ()
    lams = tuple(float(x) for x in text.split(","))
    if not lams or len(lams) > 8 or not all(0.0 <= x < 1.0 for x in lams):
        raise ValueError(f"copy λ: 1 to 8 comma-separated numbers in [0, 1), got {text!r}")
    return lams


def copy_distribution(seq: list[int], max_n: int,
                      exclude: frozenset[int] = frozenset()) -> tuple[int, dict[int, float]]:
    """(n, {token: probability}): the tokens that followed the earlier occurrences of the longest n-gram
    (n ≤ max_n) that ends `seq` and has a follower outside `exclude`; (0, {}) when none occurred. One scan
    for the last token's earlier places (~50 µs at 1,000 tokens), each extended backwards up to max_n."""
    if len(seq) < 2 or max_n < 1:
        return 0, {}
    last, end = seq[-1], len(seq) - 1
    matched: list[tuple[int, int]] = []           # (match length, follower)
    for i in [i for i, t in enumerate(seq[:end]) if t == last]:
        follower = seq[i + 1]
        if follower in exclude:
            continue
        m = 1
        while m < max_n and i - m >= 0 and seq[i - m] == seq[end - m]:
            m += 1
        matched.append((m, follower))
    if not matched:
        return 0, {}
    n = max(m for m, _ in matched)
    counts = Counter(f for m, f in matched if m >= n)
    total = sum(counts.values())
    return n, {t: c / total for t, c in counts.items()}


def mix_logits(logits, n: int, copy: dict[int, float], lambdas: tuple[float, ...]):
    """log((1 − λ_n) softmax(logits) + λ_n copy) for a torch row of logits: a row of logits again, its dtype
    kept (unchanged without a match). Elementwise exp/log over the vocabulary only inside log_softmax (a
    plain exp or log of the row took milliseconds in a busy 2-core engine process; this takes ~10 µs); the
    few copied tokens are mixed in Python. No torch import: tensor methods only."""
    if not n or not lambdas:
        return logits
    w = lambdas[min(n, len(lambdas)) - 1]
    if w <= 0.0:
        return logits
    out = logits.float().log_softmax(-1)
    ids = list(copy)
    mixed = [math.log((1.0 - w) * math.exp(lp) + w * copy[t]) for t, lp in zip(ids, out[ids].tolist())]
    out += math.log1p(-w)
    out[ids] = out.new_tensor(mixed)
    return out.to(logits.dtype)
