"""Fill-in-the-middle vocabulary and the sample transform used for training.

The special tokens and the template file written next to every exported model are the contract with the
backend (quickcode/backend/fim.py reads `quickcode_fim.json`; it never imports this module).

Orders (token ids are concatenated from separately tokenized parts, exactly as the backend builds prompts):
  PSM: <fim_prefix> P <fim_suffix> S <fim_middle> M <|endoftext|>
  SPM: <fim_suffix> S <fim_prefix> P <fim_middle> M <|endoftext|>
SPM keeps the (stable) suffix ahead of the (growing) prefix, so a keystroke leaves almost the whole prompt in
vLLM's prefix cache; PSM is the classic order. The embedded default is trained on both.
"""
from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

EOT = "<|endoftext|>"
FIM_PREFIX = "<fim_prefix>"
FIM_SUFFIX = "<fim_suffix>"
FIM_MIDDLE = "<fim_middle>"
FIM_PAD = "<fim_pad>"
FILE_SEP = "<file_sep>"
SPECIAL_TOKENS = [EOT, FIM_PREFIX, FIM_MIDDLE, FIM_SUFFIX, FIM_PAD, FILE_SEP]
TEMPLATE_FILE = "quickcode_fim.json"


@dataclass(frozen=True)
class FimSample:
    prefix: str
    suffix: str
    middle: str
    order: str  # "psm" | "spm"


def split_for_fim(text: str, rng: random.Random, spm_rate: float) -> FimSample:
    """Cut a document into prefix / middle / suffix the way completions are asked for.

    Half the cuts are line-aware (cursor inside a line, the middle runs to the end of that line or of a few
    lines: what an editor asks for), the rest are uniform character spans (robustness to odd cursors).
    """
    n = len(text)
    order = "spm" if rng.random() < spm_rate else "psm"
    if n < 8:
        return FimSample("", "", text, order)
    if rng.random() < 0.5:
        a, b = sorted(rng.randrange(n + 1) for _ in range(2))
    else:
        lines = text.splitlines(keepends=True)
        i = rng.randrange(len(lines))
        start = sum(len(x) for x in lines[:i])
        line = lines[i].rstrip("\n")
        a = start + (rng.randrange(len(line) + 1) if line else 0)
        j = min(len(lines), i + 1 + (0 if rng.random() < 0.6 else rng.randrange(1, 6)))
        b = sum(len(x) for x in lines[:j])
        if j == i + 1 and text[b - 1 : b] == "\n" and rng.random() < 0.5:
            b -= 1  # single-line fill: the middle stops before the newline, which starts the suffix
        b = max(a, b)
    if rng.random() < 0.1:
        b = n  # nothing after the cursor: end-of-file completion
    return FimSample(text[:a], text[b:], text[a:b], order)


# ── cursor places: where an editor asks for a completion ───────────────────────────────────────────────────────
CURSOR_KINDS = {          # kind → share of FIM samples
    "line_start": 0.20,   # after the indentation of a line (a new line in a block: the whole line is the middle)
    "after_punct": 0.25,  # after `(`, `.`, `=`, `,`, `:`, `[`, `{` (and the space an editor types after some)
    "after_word": 0.15,   # after a word and the space typed after it (`return |`, `for x in |`, `is |`,
                          # `import |`): healed, the prompt ends with the word and the middle starts with the
                          # space. Without it, a prefix ending in a word was only ever a name cut in two
                          # (mid_identifier), and as FIM the model went on with the name: `for i in` → `self`
    "mid_identifier": 0.20,  # inside a name being typed
    "line_end": 0.10,     # at the end of a line: the next line(s) are the middle
    "line_insert": 0.10,  # at column 0 of a line, before its indentation: whole lines (each with its line
                          # break) go in above it — a blank line between statements, and the shape of the
                          # standard single-line infilling benchmark (HumanEval's: prefix ends "\n", suffix is
                          # the next line)
}
_PUNCT = re.compile(r"[(.=,:\[{] ?")
_WORD_SPACE = re.compile(r"\b\w+ (?=\S)")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_CLOSERS = re.compile(r"[)\]}'\":,]+$")


def _cursor_places(text: str) -> dict[str, list[tuple[int, int]]]:
    """{kind: [(cursor offset, index of its line)]} over `text`."""
    places: dict[str, list[tuple[int, int]]] = {k: [] for k in CURSOR_KINDS}
    start = 0
    for i, line in enumerate(text.split("\n")):
        body = line.lstrip(" \t")
        if body:
            ind = len(line) - len(body)
            places["line_start"].append((start + ind, i))
            places["line_end"].append((start + len(line), i))
            if i > 0:
                places["line_insert"].append((start, i))
            for m in _PUNCT.finditer(line, ind):
                if m.end() < len(line):
                    places["after_punct"].append((start + m.end(), i))
            for m in _IDENT.finditer(line, ind):
                places["mid_identifier"].append((start + m.start() + 1, i))
            for m in _WORD_SPACE.finditer(line, ind):
                places["after_word"].append((start + m.end(), i))
        start += len(line) + 1
    return places


def _block_end(lines: list[str], i: int, b: int, n_more: int, ind: int, take_next: bool = False) -> int:
    """`b` moved over up to `n_more` lines after line `i` while they stay in its block (a dedent below `ind`
    ends it; blank lines stay), each with the line break before it."""
    for j in range(i + 1, min(len(lines), i + 1 + n_more)):
        body = lines[j].lstrip(" \t")
        if body and len(lines[j]) - len(body) < ind and not (take_next and j == i + 1):
            break
        b += 1 + len(lines[j])
    return b


def cursor_cut(text: str, rng: random.Random, spm_rate: float, eof_rate: float = 0.05) -> FimSample:
    """A fill-in-the-middle sample cut where an editor's cursor is (CURSOR_KINDS), with the middle an editor
    asks for: mostly the rest of the line (sometimes without the brackets and quotes an editor closed itself),
    else a short block of following lines; the suffix is the rest of the text (none with `eof_rate`: the end of
    a file). The prefix is token-healed as the backend heals it (quickcode/backend/fim.py `heal`): a prefix never ends in a
    space, the middle starts with it, so training sees the token boundaries serving shows the model."""
    from quickcode.backend.fim import heal

    order = "spm" if rng.random() < spm_rate else "psm"
    places = _cursor_places(text)
    kinds = [k for k in CURSOR_KINDS if places[k]]
    if not kinds:
        return FimSample("", "", text, order)
    kind = rng.choices(kinds, weights=[CURSOR_KINDS[k] for k in kinds])[0]
    a, i = rng.choice(places[kind])
    if kind == "mid_identifier":  # anywhere inside the name, not only after its first character
        m = _IDENT.match(text, a - 1)
        a = rng.randrange(a, m.end()) if m and m.end() > a else a
    lines = text.split("\n")
    line_end = a + len(text[a:].split("\n", 1)[0])
    r = rng.random()
    ind = len(lines[i]) - len(lines[i].lstrip(" \t"))
    if kind == "line_insert":  # whole lines: this one (60 %) or up to 5 of its block, each with its "\n"
        b = min(len(text), _block_end(lines, i, line_end, 0 if r < 0.6 else rng.randint(2, 5) - 1, ind) + 1)
    elif kind == "line_end" or r >= 0.7:  # a short block: this line's rest and up to 5 more lines of its block
        # (at a line end the next line is asked whatever its indentation)
        b = _block_end(lines, i, line_end, rng.randint(1, 5), ind, take_next=kind == "line_end")
    else:
        b = line_end
        if r < 0.15:  # the editor closed the brackets/quotes: they are already in the suffix
            closers = _CLOSERS.search(text[a:b])
            if closers and closers.start() > 0:
                b = a + closers.start()
    suffix = "" if rng.random() < eof_rate else text[b:]
    prefix, healed = heal(text[:a])
    return FimSample(prefix, suffix, healed + text[a:b], order)


DEFAULT_NAMES = {"prefix_token": FIM_PREFIX, "suffix_token": FIM_SUFFIX, "middle_token": FIM_MIDDLE,
                 "eot_token": EOT, "file_sep_token": FILE_SEP}
# In SPM, the middle token between the prefix and the middle (true: the older models; a template without the
# key) or none, the middle continuing the prefix (false): the token between prefix and middle costs the first
# token most, where exactness is decided (docs/decisions.md#spm-middle-token).
SPM_MIDDLE = "spm_middle_token"


def template_names(folder: Path | None) -> dict:
    """The FIM token names of a model or tokenizer folder: its quickcode_fim.json (a real target's tokenizer
    brings its own, e.g. CodeLlama's), else ours."""
    f = Path(folder) / TEMPLATE_FILE if folder is not None else None
    spec = json.loads(f.read_text()) if f is not None and f.exists() else {}
    return {**{k: spec.get(k, v) for k, v in DEFAULT_NAMES.items()}, SPM_MIDDLE: spec.get(SPM_MIDDLE, True)}


def write_template(model_dir: Path, order: str = "spm", names: dict | None = None) -> None:
    """The file the backend reads to build prompts for this model."""
    (model_dir / TEMPLATE_FILE).write_text(json.dumps({**(names or DEFAULT_NAMES), "order": order}, indent=2) + "\n")
