"""Fill-in-the-middle prompts: prefix/suffix/snippets → token ids, cut to the prompt budget.

The template comes from the model folder's `quickcode_fim.json` (written by draft_model; StarCoder-style
token names are the fallback). Parts are tokenized separately and concatenated, as in training. When the
prompt is over budget the suffix keeps its head and the prefix keeps its tail, both cut at line boundaries,
so the cut moves rarely and vLLM's prefix cache keeps hitting while the user types.

Tokenizing a 2,048-token context costs ~5 ms of CPU on this machine, so text is tokenized in segments, one per
line, cached by content: a prompt that grew by a keystroke re-encodes one line. A segment starts at a newline
that follows a non-space character, where a GPT-2-style byte-level pre-tokenizer always starts a new piece,
so the segments' ids concatenate to exactly the ids of the whole text; this is verified for each tokenizer on
load, and a tokenizer for which it does not hold is used whole (the old way).

Segments never seen are encoded by tiktoken's BPE over the same vocabulary and merges (`FastBPE`, ~2.5× faster
than `Tokenizer.encode`) when the tokenizer is a plain GPT-2-style byte-level BPE and gives identical ids on the
verification texts; otherwise by the tokenizer itself. Text that spells a special token (`<fim_prefix>` written
in a file) stays text on the fast path.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

from lru import LRU
from tokenizers import Tokenizer

_COMMENT = {  # line-comment marker per language id, for snippets from other files
    "python": "#", "shellscript": "#", "bash": "#", "sh": "#", "ruby": "#", "perl": "#", "r": "#", "yaml": "#",
    "toml": "#", "dockerfile": "#", "makefile": "#", "elixir": "#", "lua": "--", "sql": "--", "haskell": "--",
}


@dataclass(frozen=True)
class FimTemplate:
    prefix_id: int
    suffix_id: int
    middle_id: int
    eot_id: int
    order: str  # "psm" | "spm"

    @classmethod
    def load(cls, model_dir: Path, tok: Tokenizer, order: str = "auto") -> "FimTemplate":
        f = model_dir / "quickcode_fim.json"
        spec = json.loads(f.read_text()) if f.exists() else {
            "prefix_token": "<fim_prefix>", "suffix_token": "<fim_suffix>", "middle_token": "<fim_middle>",
            "eot_token": "<|endoftext|>", "order": "psm"}
        ids = {k: tok.token_to_id(spec[k]) for k in ("prefix_token", "suffix_token", "middle_token", "eot_token")}
        missing = [spec[k] for k, v in ids.items() if v is None]
        if missing:
            raise ValueError(f"{model_dir}: tokenizer lacks FIM tokens {missing}; set the template in quickcode_fim.json")
        return cls(ids["prefix_token"], ids["suffix_token"], ids["middle_token"], ids["eot_token"],
                   spec.get("order", "psm") if order == "auto" else order)


def render_snippets(snippets: list[tuple[str, str]], language: str) -> str:
    """Other files' code as comments above the prefix (model-agnostic, as Copilot's neighbouring tabs)."""
    c = _COMMENT.get(language, "//" if language else "#")
    out = []
    for path, text in snippets:
        out.append(f"{c} Path: {path}\n" + "".join(f"{c} {line}\n" for line in text.splitlines()))
    return "".join(out)


_SEGMENT_START = re.compile(r"(?<=\S)(?=\n)")   # before a newline that follows a non-space character
_VERIFY_TEXT = (
    "import os\n\n\nclass A(object):\n    \"\"\"Doc.\n\n    more\"\"\"\n\n    def f(self, x):  \n"
    "\tif x:\n        return {'a': [1, 2]}  # é → ok\n    \n    s = 'a\\nb'\r\n    return None\n}\n\n"
    "    x = (1 +\n         2)\n@dec\ndef g():\n  pass\n\n\n# end\n  \n")


def split_segments(text: str) -> list[str]:
    """`text` cut before every newline that follows a non-space character (`_SEGMENT_START.split`, faster)."""
    return list(segments_from_start(text))


def segments_from_start(text: str):
    """The segments of `text`, first to last, found lazily (the suffix needs only its head)."""
    start, pos = 0, text.find("\n", 1)
    while pos > 0:
        if not text[pos - 1].isspace():
            yield text[start:pos]
            start = pos
        pos = text.find("\n", pos + 1)
    yield text[start:]


def segments_from_end(text: str):
    """The segments of `text`, last to first, found lazily (the prefix needs only its tail)."""
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
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {**{chr(b): b for b in printable}, **{chr(256 + n): b for n, b in enumerate(others)}}


class FastBPE:
    """tiktoken's BPE with the ranks of a byte-level BPE tokenizer's merges; maps back to its token ids.

    tiktoken merges by rank and returns ranks. When the tokenizer's ids grow with its merges' order (what a BPE
    trainer writes: every merge's token after the tokens it joins), the ids themselves are the ranks, and
    tiktoken's output needs no Python pass to map it back (~15% of a cold prompt's tokenization here)."""

    def __init__(self, spec: dict):
        import tiktoken

        u2b = _gpt2_byte_to_unicode()
        as_bytes = lambda s: bytes(u2b[ch] for ch in s)      # noqa: E731
        vocab, merges = spec["model"]["vocab"], spec["model"]["merges"]
        pairs = [m.split(" ") if isinstance(m, str) else m for m in merges]
        b2u = {b: ch for ch, b in u2b.items()}
        byte_ids = [vocab.get(b2u[b]) for b in range(256)]
        merge_ids = [vocab.get(a + b) for a, b in pairs]
        merged = [as_bytes(a) + as_bytes(b) for a, b in pairs]
        if None not in byte_ids and None not in merge_ids and max(byte_ids) < min(merge_ids, default=1 << 30) and all(
                x < y for x, y in zip(merge_ids, merge_ids[1:])):
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
        self._enc = tiktoken.Encoding("quickcode-bpe", pat_str=_GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={})
        self.encode = self._enc.encode_ordinary if self._id_of is None else self._encode_mapped

    @classmethod
    def for_tokenizer(cls, tok: Tokenizer) -> "FastBPE | None":
        """A FastBPE when `tok` is a plain GPT-2-style byte-level BPE (no normalizer, GPT-2 regex); else None."""
        spec = json.loads(tok.to_str())
        pre, model = spec.get("pre_tokenizer") or {}, spec.get("model") or {}
        if (model.get("type") != "BPE" or spec.get("normalizer") or pre.get("type") != "ByteLevel"
                or not pre.get("use_regex", True) or pre.get("add_prefix_space") or model.get("dropout")
                or model.get("continuing_subword_prefix") or model.get("end_of_word_suffix")):
            return None
        try:
            return cls(spec)
        except (ImportError, ValueError, KeyError):
            return None

    def _encode_mapped(self, text: str) -> list[int]:
        id_of = self._id_of
        return [id_of[r] for r in self._enc.encode_ordinary(text)]


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
        self.enabled = self._concatenates(_VERIFY_TEXT) and self._concatenates(_VERIFY_TEXT.replace("\n", "\n\n "))

    def _concatenates(self, text: str) -> bool:
        whole = self.tok.encode(text).ids
        return whole == [i for seg in split_segments(text) for i in self._encode(seg)]

    def encode(self, segment: str) -> list[int]:
        ids = self.ids.get(segment)
        if ids is None:
            ids = self._encode(segment)
            self.ids[segment] = ids
        return ids


def _verify_texts() -> list[str]:
    """Texts a faster encoder must tokenize exactly as the tokenizer: code, whitespace runs, CRLF, non-ASCII,
    digits, contractions, and bytes that are not valid text on their own (emoji, CJK)."""
    return [_VERIFY_TEXT, _VERIFY_TEXT.replace("\n", "\r\n"), "   \t\n\n  x  \n", "it's we've they'll 123456 3.14e-10",
            "naïve café — 東京 🙂🚀 ok\u00a0nbsp", "x" * 300, "def f():\n\treturn [a+b for a,b in zip(x, y)] # ok"]


_caches: dict[int, tuple[Tokenizer, SegmentCache]] = {}


def segment_cache(tok: Tokenizer) -> SegmentCache | None:
    """The tokenizer's segment cache, or None where segments would not concatenate exactly."""
    entry = _caches.get(id(tok))
    if entry is None or entry[0] is not tok:
        entry = _caches[id(tok)] = (tok, SegmentCache(tok))
    return entry[1] if entry[1].enabled else None


def _keep_tail(tok: Tokenizer, text: str, budget: int) -> list[int]:
    """Token ids of the longest tail of `text` that starts at a line start and fits `budget` tokens."""
    if budget <= 0:
        return []
    cache = segment_cache(tok)
    if cache is not None:
        kept: list[list[int]] = []
        total = 0
        for seg in segments_from_end(text):          # newest lines first: stop at the budget
            ids = cache.encode(seg)
            if total + len(ids) > budget:
                if not kept:                 # one line longer than the budget: cut inside it
                    return _keep_tail_whole(tok, seg, budget)
                break
            kept.append(ids)
            total += len(ids)
        return list(chain.from_iterable(reversed(kept)))
    return _keep_tail_whole(tok, text, budget)


def _keep_head(tok: Tokenizer, text: str, budget: int) -> list[int]:
    """Token ids of the longest head of `text` that ends at a line end and fits `budget` tokens."""
    if budget <= 0:
        return []
    cache = segment_cache(tok)
    if cache is not None:
        out: list[int] = []
        for seg in segments_from_start(text):
            ids = cache.encode(seg)
            if len(out) + len(ids) > budget:
                return out or _keep_head_whole(tok, seg, budget)
            out += ids
        return out
    return _keep_head_whole(tok, text, budget)


def _keep_tail_whole(tok: Tokenizer, text: str, budget: int) -> list[int]:
    enc = tok.encode(text)
    if len(enc.ids) <= budget:
        return enc.ids
    if budget <= 0:
        return []
    start_char = enc.offsets[len(enc.ids) - budget][0]
    nl = text.find("\n", start_char)
    cut = text[nl + 1:] if nl >= 0 else text[start_char:]
    ids = tok.encode(cut).ids
    return ids[-budget:]


def _keep_head_whole(tok: Tokenizer, text: str, budget: int) -> list[int]:
    enc = tok.encode(text)
    if len(enc.ids) <= budget:
        return enc.ids
    if budget <= 0:
        return []
    end_char = enc.offsets[budget - 1][1]
    nl = text.rfind("\n", 0, end_char)
    return tok.encode(text[: nl + 1] if nl > 0 else text[:end_char]).ids[:budget]


def heal(prefix: str) -> tuple[str, str]:
    """Token healing of a prefix that ends in a space: (prefix to prompt with, text the completion must start
    with, which is then removed from it). A GPT-2-style byte-level pre-tokenizer keeps the space before a word
    with the word (`for i in range` → `for`, ` i`, ` in`, ` range`; an indent `\n    return` → `\n   `,
    ` return`), so a prompt that ends in that space shows the model a lone ` ` token where training never had
    one, and a small model then writes nonsense after `return ` or `for i in `. The prompt leaves that one space
    out and the model writes it, with the word. Spaces before it stay: their tokens are the training ones."""
    return (prefix[:-1], " ") if prefix.endswith(" ") else (prefix, "")


class Healed:
    """A completion's stream with the healed text taken off its start (see `heal`)."""

    __slots__ = ("pending",)

    def __init__(self, healed: str):
        self.pending = healed

    def feed(self, text: str) -> str | None:
        """The part of `text` that is completion; None once the output does not start with the healed text
        (the model would not write the word the user is starting: nothing to show, stop generating)."""
        if not self.pending:
            return text
        n = min(len(self.pending), len(text))
        if text[:n] != self.pending[:n]:
            return None
        self.pending = self.pending[n:]
        return text[n:]


def uses_fim(policy: str, suffix: str) -> bool:
    """Whether a completion is asked as fill-in-the-middle. `always`; or `mid_line`: only when text follows the
    cursor on its line — at the end of a line the prompt is the plain prefix (the lines below are not shown to
    the model), for models whose left-to-right completion is much better than their infilling (the embedded
    default's tiny target: 9/60 held-out idiom lines exact from the plain prefix, 0/60 as FIM)."""
    if policy == "always":
        return True
    nl = suffix.find("\n")          # the rest of the cursor's line, without copying the (long) rest of the file
    return bool((suffix if nl < 0 else suffix[:nl]).strip())


def build_prompt(tok: Tokenizer, t: FimTemplate, prefix: str, suffix: str, max_prompt_tokens: int,
                 snippets_text: str = "", fim_policy: str = "always") -> list[int]:
    """The prompt for one completion. Budget: suffix ≤ 1/4, snippets ≤ 1/4, the prefix takes the rest."""
    budget = max_prompt_tokens - 4
    snip = _keep_tail(tok, snippets_text, budget // 4) if snippets_text else []
    if not uses_fim(fim_policy, suffix):
        return [*snip, *_keep_tail(tok, prefix, budget - len(snip))]
    suf = _keep_head(tok, suffix, budget // 4) if suffix else []
    pre = _keep_tail(tok, prefix, budget - len(suf) - len(snip))
    if t.order == "spm":
        return [t.suffix_id, *suf, t.prefix_id, *snip, *pre, t.middle_id]
    return [t.prefix_id, *snip, *pre, t.suffix_id, *suf, t.middle_id]
