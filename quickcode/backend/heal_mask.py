"""The engine side of token healing (quickcode/backend/fim.py `heal`): until the healed text is written again,
the model may write only tokens that agree with it — a token that starts with what is left of it (and so
writes all of it: ` self` for ` sel`), or the next of the typed text's own tokens (` se`, then `l…`).

Pure: token texts in, token ids out; quickcode/backend/vllm_logits.py applies the mask to vLLM's logits.
"""
from __future__ import annotations

from bisect import bisect_left
from functools import lru_cache

EXTRA_KEY = "quickcode_heal"     # SamplingParams.extra_args key: the healed text (vllm_logits.py)


class TokenTexts:
    """Each token id's text, searchable by start (special tokens never agree with typed text)."""

    def __init__(self, texts: list[str], special: frozenset[int] = frozenset()):
        self.texts = texts
        pairs = sorted((t, i) for i, t in enumerate(texts) if t and i not in special)
        self._sorted = [t for t, _ in pairs]
        self._ids = [i for _, i in pairs]
        # ` ` (a healed space) is asked all the time
        self.starting_with = lru_cache(maxsize=4096)(self._starting_with)

    def _starting_with(self, text: str) -> tuple[int, ...]:
        """The ids of the tokens whose text starts with `text` (they write all of it, and more)."""
        ids = []
        k = bisect_left(self._sorted, text)
        while k < len(self._sorted) and self._sorted[k].startswith(text):
            ids.append(self._ids[k])
            k += 1
        return tuple(ids)


@lru_cache(maxsize=4)
def token_texts(tok) -> TokenTexts:
    """A `tokenizers.Tokenizer`'s vocabulary as TokenTexts (its added tokens are the special ones); one per
    tokenizer object (the service asks it for every healed request)."""
    special = frozenset(tok.get_added_tokens_decoder())
    texts = [tok.decode([i], skip_special_tokens=False) for i in range(tok.get_vocab_size())]
    return TokenTexts(texts, special)


class HealState:
    """One request: what is left of the healed text after the tokens written so far. A token may write all
    that is left (and more: ` self` for ` sel`), or be the next of the typed text's own tokens (` se`, then
    `l`): so the healed text takes at most as many tokens as it did typed (the service adds that many to the
    request's `max_tokens`), never a run of single characters."""

    def __init__(self, healed: str, typed_ids: list[int], texts: TokenTexts):
        self.rest, self.typed, self.texts, self.seen = healed, typed_ids, texts, 0

    def allowed(self, output_ids: list[int]) -> tuple[int, ...] | None:
        """The token ids the next token may be, or None once the healed text is written (no constraint)."""
        while self.rest and self.seen < len(output_ids):
            tid = output_ids[self.seen]
            t = self.texts.texts[tid]
            self.seen += 1
            typed = bool(self.typed) and tid == self.typed[0] and not t.startswith(self.rest)
            self.rest, self.typed = (self.rest[len(t):], self.typed[1:]) if typed else ("", [])
        if not self.rest:
            return None
        return self.texts.starting_with(self.rest) + tuple(self.typed[:1])


def mask_logits(logits, allowed: tuple[int, ...]):
    """`logits` with every token outside `allowed` at −inf (unchanged if `allowed` is empty: never a row with
    nothing to sample)."""
    if not allowed:
        return logits
    ids = list(allowed)
    keep = logits[ids]
    logits.fill_(float("-inf"))
    logits[ids] = keep
    return logits
