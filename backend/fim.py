"""Fill-in-the-middle prompts: prefix/suffix/snippets → token ids, cut to the prompt budget.

The template comes from the model folder's `quickcode_fim.json` (written by draft_model), else from a model
family's preset (`PRESETS`: StarCoder/StarCoder2, Qwen2.5-Coder, DeepSeek-Coder, CodeLlama, Codestral,
CodeGemma) named in the settings or detected from the tokenizer's special tokens. Parts are tokenized
separately and concatenated, as in training. When the prompt is over budget the suffix keeps its head and the
prefix keeps its tail, both cut at line boundaries, so the cut moves rarely and vLLM's prefix cache keeps
hitting while the user types.

Tokenizing a 2,048-token context costs ~5 ms of CPU on this machine, so text is tokenized in segments, one per
line, cached by content: a prompt that grew by a keystroke re-encodes one line. A segment starts at a newline
that follows a non-space character, where a GPT-2-style byte-level pre-tokenizer always starts a new piece
(for tiktoken-style pre-tokenizers — Qwen2.5, DeepSeek — at the start of a line with content instead), so the
segments' ids concatenate to exactly the ids of the whole text; this is verified for each tokenizer on load,
and a tokenizer for which neither holds is used whole (the old way).

Segments never seen are encoded by tiktoken's BPE over the same vocabulary and merges (`FastBPE`, ~2.5× faster
than `Tokenizer.encode`) when the tokenizer is a byte-level BPE with one regex (GPT-2's, or one Split as
Qwen2.5's) and gives identical ids on the verification texts; otherwise by the tokenizer itself. Text that
spells a special token (`<fim_prefix>` written in a file) stays text on the fast path.
"""
from __future__ import annotations

import json
import re
import unicodedata
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
class FimPreset:
    """A model family's FIM prompt, by token names. `eot`, `bos` and `stops` list candidates: the ones the
    tokenizer has are used. Sources: each family's model card / tokenizer_config.json (see docs/operators.md)."""
    name: str
    prefix: str
    suffix: str
    middle: str | None           # None: the model writes right after the prefix (Codestral's [SUFFIX]…[PREFIX]…)
    order: str                   # "psm" | "spm" (suffix part first)
    eot: tuple[str, ...]
    bos: tuple[str, ...] = ()    # prepended to every prompt (vLLM adds nothing to a prompt given as ids)
    stops: tuple[str, ...] = ()  # more tokens that end a completion (the next file, padding)
    file: str | None = None      # file separator: other files' snippets as `<file>path\ntext\n` blocks
    repo: str | None = None      # repository-name token (recorded; no repository name travels on the wire)
    requires: tuple[str, ...] = ()   # tokens that tell this family from another with the same FIM tokens


# Most specific first: CodeGemma and Qwen2.5-Coder share the FIM token names and differ by their other tokens.
PRESETS: tuple[FimPreset, ...] = (
    FimPreset("codegemma", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "psm", ("<eos>",), ("<bos>",),
              ("<|file_separator|>",), file="<|file_separator|>", requires=("<|file_separator|>",)),
    FimPreset("qwen2.5-coder", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "psm", ("<|endoftext|>",), (),
              ("<|fim_pad|>", "<|file_sep|>", "<|im_end|>"), file="<|file_sep|>", repo="<|repo_name|>"),
    FimPreset("deepseek-coder", "<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>", "psm",
              ("<｜end▁of▁sentence｜>",), ("<｜begin▁of▁sentence｜>",), ("<|EOT|>",)),
    FimPreset("codellama", "▁<PRE>", "▁<SUF>", "▁<MID>", "psm", ("▁<EOT>", "</s>"), ("<s>",), ("</s>",)),
    FimPreset("codestral", "[PREFIX]", "[SUFFIX]", None, "spm", ("</s>",), ("<s>",)),
    FimPreset("starcoder2", "<fim_prefix>", "<fim_suffix>", "<fim_middle>", "psm", ("<|endoftext|>",), (),
              ("<file_sep>",), file="<file_sep>", repo="<repo_name>", requires=("<file_sep>",)),
    FimPreset("starcoder", "<fim_prefix>", "<fim_suffix>", "<fim_middle>", "psm", ("<|endoftext|>",), (),
              ("<filename>",), file="<filename>", repo="<reponame>"),
)


def _has(tok: Tokenizer, name: str | None) -> bool:
    return name is not None and tok.token_to_id(name) is not None


def detect_preset(tok: Tokenizer) -> FimPreset | None:
    """The first preset whose FIM tokens (and distinguishing tokens) the tokenizer has, with an end token."""
    for p in PRESETS:
        if all(_has(tok, n) for n in (p.prefix, p.suffix, p.middle or p.prefix, *p.requires)) and any(
                _has(tok, e) for e in p.eot):
            return p
    return None


@dataclass(frozen=True)
class FimTemplate:
    prefix_id: int
    suffix_id: int
    middle_id: int | None        # None: no middle token (the completion follows the last part)
    eot_id: int
    order: str  # "psm" | "spm"
    name: str = "custom"
    bos_id: int | None = None
    file_id: int | None = None
    repo_id: int | None = None
    stop_ids: tuple[int, ...] = ()   # every token that ends a completion, eot included

    @classmethod
    def from_preset(cls, p: FimPreset, tok: Tokenizer, order: str = "auto") -> "FimTemplate":
        ids = lambda names: [i for i in (tok.token_to_id(n) for n in names) if i is not None]   # noqa: E731
        eot = ids(p.eot)[0]
        return cls(tok.token_to_id(p.prefix), tok.token_to_id(p.suffix),
                   tok.token_to_id(p.middle) if p.middle else None, eot, p.order if order == "auto" else order,
                   p.name, (ids(p.bos) or [None])[0], tok.token_to_id(p.file) if p.file else None,
                   tok.token_to_id(p.repo) if p.repo else None, tuple(dict.fromkeys([eot, *ids(p.stops)])))

    @classmethod
    def load(cls, model_dir: Path, tok: Tokenizer, order: str = "auto", preset: str = "auto") -> "FimTemplate":
        """The model folder's `quickcode_fim.json` if it has one (what draft_model writes), else the preset
        named by `preset`, else the one detected from the tokenizer's special tokens."""
        f = model_dir / "quickcode_fim.json"
        if preset == "auto" and f.exists():
            spec = json.loads(f.read_text())
            names = {k: spec[k] for k in ("prefix_token", "suffix_token", "middle_token", "eot_token")}
            found = {k: tok.token_to_id(v) for k, v in names.items()}
            missing = [names[k] for k, v in found.items() if v is None]
            if missing:
                raise ValueError(f"{f}: the tokenizer lacks the FIM tokens {missing}")
            return cls(found["prefix_token"], found["suffix_token"], found["middle_token"], found["eot_token"],
                       spec.get("order", "psm") if order == "auto" else order, "quickcode_fim.json",
                       stop_ids=(found["eot_token"],))
        if preset != "auto":
            chosen = next((p for p in PRESETS if p.name == preset), None)
            if chosen is None:
                raise ValueError(f"unknown FIM preset {preset!r}; known: {', '.join(p.name for p in PRESETS)}")
            if not all(_has(tok, n) for n in (chosen.prefix, chosen.suffix, chosen.middle or chosen.prefix)):
                raise ValueError(f"{model_dir}: the tokenizer lacks the {preset} FIM tokens")
        else:
            chosen = detect_preset(tok)
            if chosen is None:
                raise ValueError(f"{model_dir}: no known FIM tokens in the tokenizer (presets: "
                                 f"{', '.join(p.name for p in PRESETS)}); write quickcode_fim.json")
        return cls.from_preset(chosen, tok, order)

    def special_ids(self) -> set[int]:
        return {i for i in (self.prefix_id, self.suffix_id, self.middle_id, self.bos_id, self.file_id,
                            self.repo_id, *self.stop_ids) if i is not None}


def _marker_forms(tok: Tokenizer, token_id: int | None) -> list[str]:
    """How a client writes a special token in a prompt: its name, and for SentencePiece names (`▁<PRE>`) also
    without the `▁` (CodeLlama's `<PRE> …`, as Continue's template writes it)."""
    if token_id is None:
        return []
    name = tok.id_to_token(token_id)
    return [name, name[1:]] if name.startswith("▁") else [name]


def split_templated(tok: Tokenizer, t: FimTemplate, prompt: str) -> tuple[str, str] | None:
    """(prefix, suffix) of a prompt that a client already wrote in the served model's FIM template — its
    markers in any order (PSM, SPM, StarCoder's `<P><S>suffix<M>prefix`); the text after the middle marker
    continues the prefix. None when the prompt holds no such markers, or holds more than the plain template
    (text before the first marker other than BOS, a marker twice, other special tokens): that prompt is sent to
    the model as its own tokens instead. Re-templating a plain one keeps what the suffix form gets — the
    model's real order, token healing, the budget cut — so both give the same completion."""
    labels = {"P": _marker_forms(tok, t.prefix_id), "S": _marker_forms(tok, t.suffix_id),
              "M": _marker_forms(tok, t.middle_id)}
    found = []
    for label, forms in labels.items():
        hits = [(prompt.find(f), f) for f in forms if f in prompt]
        if len(hits) > 1 or any(prompt.count(f) > 1 for _, f in hits):
            return None
        if hits:
            found.append((hits[0][0], label, hits[0][1]))
    if not {"P", "S"} <= {label for _, label, _ in found}:
        return None
    found.sort()
    head = prompt[:found[0][0]]
    bos = tok.id_to_token(t.bos_id) if t.bos_id is not None else None
    if head and head != bos:
        return None
    parts = {"P": "", "S": "", "M": ""}
    for i, (pos, label, form) in enumerate(found):
        end = found[i + 1][0] if i + 1 < len(found) else len(prompt)
        parts[label] = prompt[pos + len(form):end]
    if labels["P"][0].startswith("▁"):          # CodeLlama: "<PRE> {prefix} <SUF>{suffix} <MID>"
        parts = {k: v[1:] if k == "P" and v.startswith(" ") else v for k, v in parts.items()}
        if found[-1][1] != "P":
            parts["P"] = parts["P"][:-1] if parts["P"].endswith(" ") else parts["P"]
            parts["S"] = parts["S"][:-1] if parts["S"].endswith(" ") else parts["S"]
    specials = [c for c in (tok.id_to_token(i) for i in t.special_ids()) if c]
    if any(s in v for v in parts.values() for s in specials):
        return None
    return parts["P"] + parts["M"], parts["S"]


def holds_special_tokens(tok: Tokenizer, prompt: str) -> bool:
    """Whether `prompt` spells one of the tokenizer's special (added) tokens."""
    return any(a.special and a.content in prompt for a in tok.get_added_tokens_decoder().values())


def client_prompt(tok: Tokenizer | None, t: FimTemplate | None, prompt: str,
                  suffix: str) -> tuple[str, str, list[int] | None]:
    """(prefix, suffix, ids) for a compat endpoint's prompt: plain text is the prefix (ids None: built as usual);
    a prompt in the served model's FIM template is split back into prefix and suffix; any other prompt that
    spells special tokens goes to the model as its tokens, the special tokens as themselves (ids)."""
    if tok is None or t is None or not holds_special_tokens(tok, prompt):
        return prompt, suffix, None
    split = split_templated(tok, t, prompt)
    if split is not None:
        return split[0], split[1], None
    return prompt, suffix, tok.encode(prompt).ids


def drop_special_stops(tok: Tokenizer | None, stop: list[str]) -> list[str]:
    """Stop strings minus the tokenizer's special tokens (a client's template lists them: `<|fim_pad|>`, …);
    those never reach the text, and the model's end tokens already stop it."""
    if tok is None:
        return stop
    specials = {a.content for a in tok.get_added_tokens_decoder().values() if a.special}
    return [s for s in stop if s not in specials]


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


def split_segments(text: str, mode: str = "newline") -> list[str]:
    """`text` cut before every newline that follows a non-space character (`_SEGMENT_START.split`, faster); or,
    mode "line_start", after every newline that starts a line with content (see `_LINE_START`)."""
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
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {**{chr(b): b for b in printable}, **{chr(256 + n): b for n, b in enumerate(others)}}


class FastBPE:
    """tiktoken's BPE with the ranks of a byte-level BPE tokenizer's merges; maps back to its token ids.

    tiktoken merges by rank and returns ranks. When the tokenizer's ids grow with its merges' order (what a BPE
    trainer writes: every merge's token after the tokens it joins), the ids themselves are the ranks, and
    tiktoken's output needs no Python pass to map it back (~15% of a cold prompt's tokenization here)."""

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
        self._enc = tiktoken.Encoding("quickcode-bpe", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
        self._nfc = nfc
        self.encode = self._enc.encode_ordinary if self._id_of is None and not nfc else self._encode_mapped

    @classmethod
    def for_tokenizer(cls, tok: Tokenizer) -> "FastBPE | None":
        """A FastBPE when `tok` is a byte-level BPE that tiktoken can run: GPT-2's (ByteLevel with its regex), or
        one regex split then ByteLevel without its own (Qwen2.5's tiktoken-style tokenizer.json), with no
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
            if (split.get("behavior") != "Isolated" or split.get("invert") or "Regex" not in split.get("pattern", {})
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
        for mode in ("newline", "line_start"):       # the first way of cutting that is exact for this tokenizer
            if all(self._concatenates(t, mode) for t in _verify_texts() + [_VERIFY_TEXT.replace("\n", "\n\n ")]):
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
        for seg in segments_from_end(text, cache.mode):    # newest lines first: stop at the budget
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
        for seg in segments_from_start(text, cache.mode):
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


def _file_blocks(tok: Tokenizer, t: FimTemplate, files: list[tuple[str, str]], path: str, budget: int) -> list[int]:
    """Other files in the family's repository format (`<file>path\ntext\n` each, then `<file>path\n` of the
    file being edited), the last files kept first when over `budget`, the oldest kept one cut to its tail."""
    head = [t.file_id, *tok.encode(f"{path}\n").ids] if path else []
    left = budget - len(head)
    blocks: list[list[int]] = []
    for p, text in reversed(files):
        ids = [t.file_id, *tok.encode(f"{p}\n").ids]
        if left - len(ids) < 8:            # not even a few lines of this file: stop here
            break
        body = _keep_tail(tok, text if text.endswith("\n") else text + "\n", left - len(ids))
        blocks.append(ids + body)
        left -= len(ids) + len(body)
    return [*chain.from_iterable(reversed(blocks)), *head] if left >= 0 else []


def build_prompt(tok: Tokenizer, t: FimTemplate, prefix: str, suffix: str, max_prompt_tokens: int,
                 snippets_text: str = "", fim_policy: str = "always", files: list[tuple[str, str]] | None = None,
                 path: str = "") -> list[int]:
    """The prompt for one completion. Budget: suffix ≤ 1/4, snippets ≤ 1/4, the prefix takes the rest.
    Other files come as `files` (path, text) for a template with a file token, else as `snippets_text`."""
    bos = [t.bos_id] if t.bos_id is not None else []
    budget = max_prompt_tokens - 4 - len(bos)
    if files and t.file_id is not None:
        snip, ctx = [], _file_blocks(tok, t, files, path, budget // 4)
    else:
        snip, ctx = (_keep_tail(tok, snippets_text, budget // 4) if snippets_text else []), []
    used = len(snip) + len(ctx)
    if not uses_fim(fim_policy, suffix):
        return [*bos, *ctx, *snip, *_keep_tail(tok, prefix, budget - used)]
    suf = _keep_head(tok, suffix, budget // 4) if suffix else []
    pre = _keep_tail(tok, prefix, budget - len(suf) - used)
    mid = [t.middle_id] if t.middle_id is not None else []
    if t.order == "spm":
        return [*bos, *ctx, t.suffix_id, *suf, t.prefix_id, *snip, *pre, *mid]
    return [*bos, *ctx, t.prefix_id, *snip, *pre, t.suffix_id, *suf, *mid]
