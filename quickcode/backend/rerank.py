"""Best of several lines: the candidate that makes the code around it most likely (pure functions).

A request with `best_of` k ≥ 2 asks the engine for the greedy line and k - 1 sampled ones, then scores each
in plain left-to-right order — the end of the prefix, the candidate line, the start of the suffix — and
returns the line with the highest log-likelihood of its own tokens and the suffix's (InCoder's left-to-right
reranking, Fried et al. 2022, §4). The greedy line is the most likely continuation of the prefix alone; the
score also asks whether the lines below still make sense after it (`depth = 0` before a suffix that says
`depth += 1`). On HumanEval single-line infilling with the committed 4.2 M target (offline, PyTorch, 200
tasks): greedy 15 lines exact, the best of greedy + 8 samples at temperature 0.8 by this score 25.

The window is short on purpose: a score ignores the prefix cache (vLLM recomputes a prompt whose logprobs are
asked for), so every candidate pays a prefill of its window.
"""
from __future__ import annotations

from dataclasses import dataclass

from tokenizers import Tokenizer

MAX_BEST_OF = 9                 # candidates per request at most (greedy + 8 samples)
SAMPLE_TEMPERATURE = 0.8
WINDOW_PREFIX_CHARS = 800       # prefix characters before a candidate in its score window (whole lines)
WINDOW_SUFFIX_CHARS = 400       # suffix characters after it
WINDOW_TOKENS = 330             # about what a window holds (1,200 characters, a line): the scheduler's cost


def line_of(text: str) -> str:
    """A completion's first line, as the cursor sees it: the text through the first line end after the first
    non-newline character, that line end included (a completion that opens a new line keeps that newline
    and the line it writes; one that ends without a line end — the model closed the gap — has none)."""
    start = len(text) - len(text.lstrip("\n"))
    end = text.find("\n", start)
    return text if end < 0 else text[:end + 1]


def distinct_lines(texts: list[str]) -> list[str]:
    """Each candidate's line once, in the order given (the greedy one first), blank lines left out."""
    seen: dict[str, None] = {}
    for t in texts:
        line = line_of(t)
        if line.strip():
            seen.setdefault(line, None)
    return list(seen)


@dataclass(frozen=True)
class Window:
    ids: list[int]
    first_scored: int           # index in `ids` of the first token the score sums (the candidate's first)


def window(tok: Tokenizer, prefix: str, line: str, suffix: str, prefix_chars: int = WINDOW_PREFIX_CHARS,
           suffix_chars: int = WINDOW_SUFFIX_CHARS) -> Window:
    """The text a candidate is scored in: the prefix's last `prefix_chars` (from a line start when cut), the
    line as it would be inserted, the suffix's first `suffix_chars`. Scored: every token from the one that
    holds the line's first character (a token across the boundary counts: it is part of the choice)."""
    pre = prefix
    if len(prefix) > prefix_chars:
        pre = prefix[-prefix_chars:]
        cut = pre.find("\n")
        pre = pre[cut + 1:] if 0 <= cut < len(pre) - 1 else pre
    enc = tok.encode(pre + line + suffix[:suffix_chars], add_special_tokens=False)
    start = len(pre)
    first = next((i for i, (_, end) in enumerate(enc.offsets) if end > start), len(enc.ids))
    return Window(list(enc.ids), max(1, first))


def best(lines: list[str], scores: list[float]) -> str:
    """The highest score; ties to the earlier line (the greedy one comes first)."""
    if not lines:
        return ""
    return lines[max(range(len(lines)), key=lambda i: (scores[i], -i))]
