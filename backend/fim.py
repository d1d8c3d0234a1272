"""Fill-in-the-middle prompts: prefix/suffix/snippets → token ids, cut to the prompt budget.

The template comes from the model folder's `quickcode_fim.json` (written by draft_model; StarCoder-style
token names are the fallback). Parts are tokenized separately and concatenated, as in training. When the
prompt is over budget the suffix keeps its head and the prefix keeps its tail, both cut at line boundaries,
so the cut moves rarely and vLLM's prefix cache keeps hitting while the user types.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

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


def _keep_tail(tok: Tokenizer, text: str, budget: int) -> list[int]:
    """Token ids of the longest tail of `text` that starts at a line start and fits `budget` tokens."""
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


def _keep_head(tok: Tokenizer, text: str, budget: int) -> list[int]:
    """Token ids of the longest head of `text` that ends at a line end and fits `budget` tokens."""
    enc = tok.encode(text)
    if len(enc.ids) <= budget:
        return enc.ids
    if budget <= 0:
        return []
    end_char = enc.offsets[budget - 1][1]
    nl = text.rfind("\n", 0, end_char)
    return tok.encode(text[: nl + 1] if nl > 0 else text[:end_char]).ids[:budget]


def build_prompt(tok: Tokenizer, t: FimTemplate, prefix: str, suffix: str, max_prompt_tokens: int,
                 snippets_text: str = "") -> list[int]:
    """The prompt for one completion. Budget: suffix ≤ 1/4, snippets ≤ 1/4, the prefix takes the rest."""
    budget = max_prompt_tokens - 4
    suf = _keep_head(tok, suffix, budget // 4) if suffix else []
    snip = _keep_tail(tok, snippets_text, budget // 4) if snippets_text else []
    pre = _keep_tail(tok, prefix, budget - len(suf) - len(snip))
    if t.order == "spm":
        return [t.suffix_id, *suf, t.prefix_id, *snip, *pre, t.middle_id]
    return [t.prefix_id, *snip, *pre, t.suffix_id, *suf, t.middle_id]
