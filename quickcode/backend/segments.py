"""Fast, exact tokenization of prompt text, cut at line boundaries to a token budget.

Tokenizing a whole context on every keystroke costs more CPU than the time to first token can spare
(docs/decisions.md#segment-tokenizer), so text is tokenized in segments, one per line, cached by content: a
prompt that grew by a keystroke re-encodes one line. A segment starts at a newline
that follows a non-space character, where a GPT-2-style byte-level pre-tokenizer always starts a new piece
(for tiktoken-style pre-tokenizers — Qwen2.5, DeepSeek — at the start of a line with content instead), so the
segments' ids concatenate to exactly the ids of the whole text; this is verified for each tokenizer on load,
and a tokenizer for which neither holds is used whole (the old way).

Segments never seen are encoded by tiktoken's BPE over the same vocabulary and merges (`FastBPE`, faster
than `Tokenizer.encode`) when the tokenizer is a byte-level BPE with one regex (GPT-2's, or one Split as
Qwen2.5's) and gives identical ids on the verification texts; otherwise by the tokenizer itself. Text that
spells a special token (`<fim_prefix>` written in a file) stays text on the fast path.

`keep_tail`/`keep_head`: the prefix keeps its tail and the suffix its head, cut at line boundaries, so the cut
moves rarely and vLLM's prefix cache keeps hitting while the user types.
"""
from __future__ import annotations

import json
import re
import unicodedata
from itertools import chain

from lru import LRU
from tokenizers import Tokenizer


_SEGMENT_START = re.compile(r"(?<=\S)(?=\n)")   # before a newline that follows a non-space character
_VERIFY_TEXT = (
    "import os\n\n\nclass A(object):\n    \"\"\"Doc.\n\n    more\"\"\"\n\n    def f(self, x):  \n"
    "\tif x:\n        return {'a': [1, 2]}  # é → ok\n    \n    s = 'a\\nb'\r\n    return None\n}\n\n"
    "    x = (1 +\n         2)\n@dec\ndef g():\n  pass\n\n\n# end\n  \n")


def split_segments(text: str, mode: str = "newline") -> list[str]:
    """`text` cut before every newline that follows a non-space character (`_SEGMENT_START.split`, faster);
    or, mode "line_start", after every newline that starts a line with content (see `_LINE_START`)."""
    return list(segments_from_start(text, mode))


# Tiktoken-style pre-tokenizers (Qwen2.5, DeepSeek, Llama 3…) keep a newline with the punctuation before it
# (`)\n`) and whitespace runs that end in newlines together, but always start a new piece after the last
# newline before a line's content: cut there. A newline followed by a line of only spaces is not a cut.
_LINE_START = re.compile(r"(?<=\n)(?=[ \t]*[^\s])")


def segments_from_start(text: str, mode: str = "newline"):
    """The segments of `text`, first to last, found lazily (the suffix needs only its head)."""
    if mode == "line_start":
        start = 0
        for m in _LINE_START.finditer(text):
            if m.start() > start:
                yield text[start:m.start()]
                start = m.start()
        yield text[start:]
        return
    start, pos = 0, text.find("\n", 1)
    while pos > 0:
        if not text[pos - 1].isspace():
            yield text[start:pos]
            start = pos
        pos = text.find("\n", pos + 1)
    yield text[start:]


def segments_from_end(text: str, mode: str = "newline"):
    """The segments of `text`, last to first, found lazily (the prefix needs only its tail)."""
    if mode == "line_start":
        yield from reversed(list(segments_from_start(text, mode)))
        return
    end, pos = len(text), text.rfind("\n")
    while pos > 0:
        if not text[pos - 1].isspace():
            yield text[pos:end]
            end = pos
        pos = text.rfind("\n", 0, pos)
    yield text[:end]


_GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def _gpt2_byte_to_unicode() -> dict[str, int]:
    """The byte-level alphabet (GPT-2's bytes_to_unicode, inverted): character in vocab and merges → byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {**{chr(b): b for b in printable}, **{chr(256 + n): b for n, b in enumerate(others)}}


class FastBPE:
    """tiktoken's BPE with the ranks of a byte-level BPE tokenizer's merges; maps back to its token ids.

    tiktoken merges by rank and returns ranks. When the tokenizer's ids grow with its merges' order (what a
    BPE trainer writes: every merge's token after the tokens it joins), the ids themselves are the ranks, and
    tiktoken's output needs no Python pass to map it back (a share of a cold prompt's tokenization)."""

    def __init__(self, spec: dict, pattern: str = _GPT2_PATTERN, nfc: bool = False):
        import tiktoken

        u2b = _gpt2_byte_to_unicode()
        as_bytes = lambda s: bytes(u2b[ch] for ch in s)      # noqa: E731
        vocab, merges = spec["model"]["vocab"], spec["model"]["merges"]
        pairs = [m.split(" ") if isinstance(m, str) else m for m in merges]
        b2u = {b: ch for ch, b in u2b.items()}
        byte_ids = [vocab.get(b2u[b]) for b in range(256)]
        merge_ids = [vocab.get(a + b) for a, b in pairs]
        merged = [as_bytes(a) + as_bytes(b) for a, b in pairs]
        if (None not in byte_ids and None not in merge_ids
                and max(byte_ids) < min(merge_ids, default=1 << 30)
                and all(x < y for x, y in zip(merge_ids, merge_ids[1:]))):
            ranks = {bytes([b]): i for b, i in enumerate(byte_ids)}
            ranks.update(zip(merged, merge_ids))
            self._id_of = None                                  # ranks are the ids
        else:
            ranks = {bytes([b]): b for b in range(256)}
            ranks.update((m, 256 + i) for i, m in enumerate(merged))
            self._id_of = [-1] * len(ranks)
            for token, i in vocab.items():
                r = ranks.get(as_bytes(token)) if all(ch in u2b for ch in token) else None
                if r is not None:
                    self._id_of[r] = i
            if -1 in self._id_of:
                raise ValueError("a merge's result is not in the vocabulary")
        self._enc = tiktoken.Encoding("quickcode-bpe", pat_str=pattern, mergeable_ranks=ranks,
                                      special_tokens={})
        self._nfc = nfc
        self.encode = self._enc.encode_ordinary if self._id_of is None and not nfc else self._encode_mapped

    @classmethod
    def for_tokenizer(cls, tok: Tokenizer) -> "FastBPE | None":
        """A FastBPE when `tok` is a byte-level BPE that tiktoken can run: GPT-2's (ByteLevel with its regex),
        or one regex split then ByteLevel without its own (Qwen2.5's tiktoken-style tokenizer.json), with no
        normalizer or NFC; else None."""
        spec = json.loads(tok.to_str())
        pre, model, norm = spec.get("pre_tokenizer") or {}, spec.get("model") or {}, spec.get("normalizer")
        if (model.get("type") != "BPE" or model.get("dropout") or model.get("continuing_subword_prefix")
                or model.get("end_of_word_suffix") or (norm and norm.get("type") != "NFC")):
            return None
        if pre.get("type") == "ByteLevel" and pre.get("use_regex", True) and not pre.get("add_prefix_space"):
            pattern = _GPT2_PATTERN
        elif pre.get("type") == "Sequence" and [p.get("type") for p in pre.get("pretokenizers", [])] == [
                "Split", "ByteLevel"]:
            split, level = pre["pretokenizers"]
            if (split.get("behavior") != "Isolated" or split.get("invert")
                    or "Regex" not in split.get("pattern", {})
                    or level.get("use_regex", True) or level.get("add_prefix_space")):
                return None
            pattern = split["pattern"]["Regex"]
        else:
            return None
        try:
            return cls(spec, pattern, nfc=bool(norm))
        except (ImportError, ValueError, KeyError):
            return None

    def _encode_mapped(self, text: str) -> list[int]:
        if self._nfc:
            text = unicodedata.normalize("NFC", text)
        ranks = self._enc.encode_ordinary(text)
        id_of = self._id_of
        return ranks if id_of is None else [id_of[r] for r in ranks]


class SegmentCache:
    """Token ids per line segment, cached by content (see the module docstring)."""

    def __init__(self, tok: Tokenizer, max_segments: int = 50_000):
        self.tok = tok
        self.ids = LRU(max_segments)
        self._encode = lambda text: tok.encode(text).ids      # noqa: E731
        fast = FastBPE.for_tokenizer(tok)
        if fast is not None and all(fast.encode(t) == self._encode(t) for t in _verify_texts()):
            self._encode = fast.encode
        self.fast = fast is not None and self._encode == fast.encode
        self.mode, self.enabled = "newline", False
        texts = _verify_texts() + [_VERIFY_TEXT.replace("\n", "\n\n ")]
        for mode in ("newline", "line_start"):       # the first way of cutting exact for this tokenizer
            if all(self._concatenates(t, mode) for t in texts):
                self.mode, self.enabled = mode, True
                break

    def _concatenates(self, text: str, mode: str) -> bool:
        whole = self.tok.encode(text).ids
        return whole == [i for seg in split_segments(text, mode) for i in self._encode(seg)]

    def encode(self, segment: str) -> list[int]:
        ids = self.ids.get(segment)
        if ids is None:
            ids = self._encode(segment)
            self.ids[segment] = ids
        return ids


def _verify_texts() -> list[str]:
    """Texts a faster encoder must tokenize exactly as the tokenizer: code, whitespace runs, CRLF, non-ASCII,
    digits, contractions, and bytes that are not valid text on their own (emoji, CJK)."""
    return [_VERIFY_TEXT, _VERIFY_TEXT.replace("\n", "\r\n"), "   \t\n\n  x  \n",
            "it's we've they'll 123456 3.14e-10", "naïve café — 東京 🙂🚀 ok\u00a0nbsp", "x" * 300,
            "def f():\n\treturn [a+b for a,b in zip(x, y)] # ok"]


_caches: dict[int, tuple[Tokenizer, SegmentCache]] = {}


def segment_cache(tok: Tokenizer) -> SegmentCache | None:
    """The tokenizer's segment cache, or None where segments would not concatenate exactly."""
    entry = _caches.get(id(tok))
    if entry is None or entry[0] is not tok:
        entry = _caches[id(tok)] = (tok, SegmentCache(tok))
    return entry[1] if entry[1].enabled else None


def keep_tail(tok: Tokenizer, text: str, budget: int) -> list[int]:
    """Token ids of the longest tail of `text` that starts at a line start and fits `budget` tokens."""
    if budget <= 0:
        return []
    cache = segment_cache(tok)
    if cache is not None:
        kept: list[list[int]] = []
        total = 0
        for seg in segments_from_end(text, cache.mode):    # newest lines first: stop at the budget
            ids = cache.encode(seg)
            if total + len(ids) > budget:
                if not kept:                 # one line longer than the budget: cut inside it
                    return _keep_whole(tok, seg, budget, tail=True)
                break
            kept.append(ids)
            total += len(ids)
        return list(chain.from_iterable(reversed(kept)))
    return _keep_whole(tok, text, budget, tail=True)


def keep_head(tok: Tokenizer, text: str, budget: int) -> list[int]:
    """Token ids of the longest head of `text` that ends at a line end and fits `budget` tokens."""
    if budget <= 0:
        return []
    cache = segment_cache(tok)
    if cache is not None:
        out: list[int] = []
        for seg in segments_from_start(text, cache.mode):
            ids = cache.encode(seg)
            if len(out) + len(ids) > budget:
                return out or _keep_whole(tok, seg, budget, tail=False)
            out += ids
        return out
    return _keep_whole(tok, text, budget, tail=False)


def _keep_whole(tok: Tokenizer, text: str, budget: int, *, tail: bool) -> list[int]:
    """Without segments: encode `text` once, cut it at the line edge nearest the budget's (the tail starts at
    a line start, the head ends at a line end; inside the line when there is none), encode the cut again."""
    enc = tok.encode(text)
    if len(enc.ids) <= budget:
        return enc.ids
    if budget <= 0:
        return []
    if tail:
        start_char = enc.offsets[len(enc.ids) - budget][0]
        nl = text.find("\n", start_char)
        return tok.encode(text[nl + 1:] if nl >= 0 else text[start_char:]).ids[-budget:]
    end_char = enc.offsets[budget - 1][1]
    nl = text.rfind("\n", 0, end_char)
    return tok.encode(text[: nl + 1] if nl > 0 else text[:end_char]).ids[:budget]
