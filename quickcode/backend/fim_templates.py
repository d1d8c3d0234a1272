"""FIM templates: how a model family writes fill-in-the-middle prompts, by its special tokens.

The template comes from the model folder's `quickcode_fim.json` (written by draft_model), else from a model
family's preset (`PRESETS`: StarCoder/StarCoder2, Qwen2.5-Coder, DeepSeek-Coder, CodeLlama, Codestral,
CodeGemma) named in the settings or detected from the tokenizer's special tokens. A compat endpoint's prompt
that a client already wrote in the served model's template is split back into prefix and suffix here.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from tokenizers import AddedToken, Tokenizer


@dataclass(frozen=True)
class FimPreset:
    """A model family's FIM prompt, by token names. `eot`, `bos` and `stops` list candidates: the ones the
    tokenizer has are used. Sources: each family's model card and tokenizer_config.json
    (docs/operators.md)."""
    name: str
    prefix: str
    suffix: str
    middle: str | None           # None: the model writes right after the prefix ([SUFFIX]…[PREFIX]…)
    order: str                   # "psm" | "spm" (suffix part first)
    eot: tuple[str, ...]
    bos: tuple[str, ...] = ()    # prepended to every prompt (vLLM adds nothing to a prompt given as ids)
    stops: tuple[str, ...] = ()  # more tokens that end a completion (the next file, padding)
    file: str | None = None      # file separator: other files' snippets as `<file>path\ntext\n` blocks
    repo: str | None = None      # repository-name token (recorded; no repository name travels on the wire)
    requires: tuple[str, ...] = ()   # tokens that tell this family from another with the same FIM tokens


# Most specific first: CodeGemma and Qwen2.5-Coder share the FIM token names and differ by their other tokens.
PRESETS: tuple[FimPreset, ...] = (
    FimPreset("codegemma", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "psm", ("<eos>",),
              ("<bos>",), ("<|file_separator|>",), file="<|file_separator|>",
              requires=("<|file_separator|>",)),
    FimPreset("qwen2.5-coder", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "psm",
              ("<|endoftext|>",), (), ("<|fim_pad|>", "<|file_sep|>", "<|im_end|>"), file="<|file_sep|>",
              repo="<|repo_name|>"),
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
    # SPM: the middle token between the prefix and the completion (True), or the prompt ends with the prefix
    # and the completion continues it (False, `spm_middle_token: false` in quickcode_fim.json: the FIM paper's
    # and StarCoder's SPM keep prefix and middle contiguous, so the model's left-to-right skill carries over)
    spm_middle: bool = True
    # the model has no FIM tokens (quickcode_fim.json `prefix_only`: its three tokens are placeholders so that
    # the folder loads): every prompt is the plain prefix, whatever `fim_policy` says (fim.py `build_prompt`)
    prefix_only: bool = False

    @classmethod
    def from_preset(cls, p: FimPreset, tok: Tokenizer, order: str = "auto") -> "FimTemplate":
        ids = lambda names: [i for i in (tok.token_to_id(n) for n in names) if i is not None]   # noqa: E731
        eot = ids(p.eot)[0]
        return cls(tok.token_to_id(p.prefix), tok.token_to_id(p.suffix),
                   tok.token_to_id(p.middle) if p.middle else None, eot,
                   p.order if order == "auto" else order,
                   p.name, (ids(p.bos) or [None])[0], tok.token_to_id(p.file) if p.file else None,
                   tok.token_to_id(p.repo) if p.repo else None, tuple(dict.fromkeys([eot, *ids(p.stops)])))

    @classmethod
    def from_names(cls, spec: dict, tok: Tokenizer, order: str = "auto",
                   where: str = "quickcode_fim.json") -> "FimTemplate":
        """The template a `quickcode_fim.json` spells out (token names, order, `spm_middle_token`): what the
        backend serves and quickcode/draft_model/pack.py trains on."""
        names = {k: spec[k] for k in ("prefix_token", "suffix_token", "middle_token", "eot_token")}
        found = {k: tok.token_to_id(v) for k, v in names.items()}
        missing = [names[k] for k, v in found.items() if v is None]
        if missing:
            raise ValueError(f"{where}: the tokenizer lacks the FIM tokens {missing}")
        return cls(found["prefix_token"], found["suffix_token"], found["middle_token"], found["eot_token"],
                   spec.get("order", "psm") if order == "auto" else order, "quickcode_fim.json",
                   stop_ids=(found["eot_token"],), spm_middle=bool(spec.get("spm_middle_token", True)),
                   prefix_only=bool(spec.get("prefix_only", False)))

    @classmethod
    def load(cls, model_dir: Path, tok: Tokenizer, order: str = "auto",
             preset: str = "auto") -> "FimTemplate":
        """The model folder's `quickcode_fim.json` if it has one (what draft_model writes), else the preset
        named by `preset`, else the one detected from the tokenizer's special tokens."""
        f = model_dir / "quickcode_fim.json"
        if preset == "auto" and f.exists():
            return cls.from_names(json.loads(f.read_text()), tok, order, where=str(f))
        if preset != "auto":
            chosen = next((p for p in PRESETS if p.name == preset), None)
            if chosen is None:
                known = ", ".join(p.name for p in PRESETS)
                raise ValueError(f"unknown FIM preset {preset!r}; known: {known}")
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
    (text before the first marker other than BOS, a marker twice, other special tokens): that prompt is sent
    to the model as its own tokens instead. Re-templating a plain one keeps what the suffix form gets — the
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


def control_tokens(tok: Tokenizer, t: FimTemplate | None = None) -> set[str]:
    """The tokenizer's special tokens and the template's own (DeepSeek's tokenizer.json marks its FIM tokens
    as not special)."""
    names = {a.content for a in tok.get_added_tokens_decoder().values() if a.special}
    if t is not None:
        names |= {n for n in (tok.id_to_token(i) for i in t.special_ids()) if n}
    return names


def holds_special_tokens(tok: Tokenizer, prompt: str, t: FimTemplate | None = None) -> bool:
    """Whether `prompt` spells one of the tokenizer's special tokens or the template's tokens."""
    return any(name in prompt for name in control_tokens(tok, t))


_MARKER = re.compile(r"<[^\s<>]+>")


def reads_markers_as_text(tok: Tokenizer) -> Tokenizer:
    """`tok`, set to encode a special token's name written in text as that text: `<fim_middle>` in a user's
    file is code, never the marker (else a file could rewrite its own prompt's layout). Added tokens shaped
    like a marker but not flagged special (DeepSeek's `<｜fim▁hole｜>`) are flagged first (same ids); other
    added tokens (whitespace runs) stay as they are. The template's tokens go in by id
    (quickcode/backend/fim.py fim_layout); a client's own template by `templated_ids`."""
    marked = [a for a in tok.get_added_tokens_decoder().values()
              if not a.special and _MARKER.fullmatch(a.content)]
    if marked:
        tok.add_special_tokens([AddedToken(a.content, special=True, normalized=a.normalized, lstrip=a.lstrip,
                                           rstrip=a.rstrip, single_word=a.single_word) for a in marked])
    tok.encode_special_tokens = True
    return tok


def templated_ids(tok: Tokenizer, t: FimTemplate | None, prompt: str) -> list[int]:
    """The ids of a prompt a client templated itself: each special token it spells is that token, the text
    between them text (also on a tokenizer set by `reads_markers_as_text`)."""
    names = sorted(control_tokens(tok, t), key=len, reverse=True)
    ids: list[int] = []
    for piece in re.split("(" + "|".join(map(re.escape, names)) + ")", prompt) if names else [prompt]:
        if piece in names:
            ids.append(tok.token_to_id(piece))
        elif piece:
            ids.extend(tok.encode(piece, add_special_tokens=False).ids)
    return ids


def client_prompt(tok: Tokenizer | None, t: FimTemplate | None, prompt: str,
                  suffix: str | None) -> tuple[str, str, list[int] | None]:
    """(prefix, suffix, ids) for a compat endpoint's prompt. A request that gives a `suffix` (even empty)
    gave its prompt as the text before the cursor: it is the prefix, markers and all, as text (ids None:
    built as usual). Without one, a prompt in the served model's FIM template is split back into prefix and
    suffix (Continue's templates); any other prompt that spells special tokens goes to the model as its
    tokens, the special tokens as themselves (ids); plain text is the prefix."""
    if suffix is not None or tok is None or t is None or not holds_special_tokens(tok, prompt, t):
        return prompt, suffix or "", None
    split = split_templated(tok, t, prompt)
    if split is not None:
        return split[0], split[1], None
    return prompt, "", templated_ids(tok, t, prompt)


def drop_special_stops(tok: Tokenizer | None, stop: list[str], t: FimTemplate | None = None) -> list[str]:
    """Stop strings minus the tokenizer's special tokens (a client's template lists them: `<|fim_pad|>`, …);
    those never reach the text, and the model's end tokens already stop it."""
    if tok is None:
        return stop
    specials = control_tokens(tok, t)
    return [s for s in stop if s not in specials]
