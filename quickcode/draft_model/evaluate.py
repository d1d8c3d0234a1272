"""Offline (PyTorch) evaluation of a target/draft pair: held-out loss, greedy acceptance per K and per code pattern.

Greedy speculative decoding is deterministic, which makes acceptance simple to measure exactly: let `g` be the
target's greedy continuation of a prompt and `agree[j]` whether the draft's greedy next token on the context
`prompt + g[:j]` equals `g[j]` (one teacher-forced draft forward gives every `agree[j]`). A draft step that
starts at position t with K proposals accepts `min(K, run of agree from t)` tokens — the proposals after the
first accepted ones are made on the same context the target saw, and the first mismatch ends the step. The
loop `t += accepted + 1` (the target adds one token per step: the correction, or the bonus after K accepts)
is then what vLLM does with `method="draft_model"`, starting after the prefill token.

Figures per K: acceptance rate = accepted / proposed draft tokens (vLLM's "draft acceptance rate"), the
per-token acceptance α = accepted / (accepted + rejected) (the i.i.d. rate of the standard analysis, also what
the per-pattern table reports), tokens per target step, and speed-ups: expected from α by
(1 - α^(K+1)) / ((1 - α)(cK + 1)) with c the measured draft/target cost ratio of one decode step, and simulated
as tokens-per-step / (cK + 1).
"""
from __future__ import annotations

import ast
import json
import keyword
import math
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from quickcode.draft_model import corpus, tokenizer as tokmod
from quickcode.draft_model.corpus import Document
from quickcode.draft_model.fim import split_for_fim, template_names
from quickcode.draft_model.pack import chunks, load_bin

K_MAX = 8
PATTERNS = ("brackets/syntax", "common idioms", "identifiers", "complex logic", "comments/docstrings")

# ── the code-pattern classifier ──────────────────────────────────────────────────────────────────────────────
# A target token is classified from its text and its place in the code (prefix + completion so far), first
# rule that applies wins:
#   1. comments/docstrings — any non-blank character of the token lies in a `#` comment or a triple-quoted
#      string that opens a logical line (a docstring); a blank token takes the region of its first character.
#   2. brackets/syntax     — no letter, digit or underscore: brackets, punctuation, operators, quotes, newlines,
#      indentation; also special tokens (end-of-text ends the completion: a structural token).
#   3. common idioms       — the token overlaps an idiom n-gram of IDIOM_PATTERNS in the code (`self.`,
#      `def __init__(self`, `for i in range(`, `if __name__ == "__main__":`, `return None`, ...) or is a
#      Python keyword / common builtin name.
#   4. identifiers         — otherwise a name piece: `[A-Za-z_][A-Za-z0-9_]*` (after blanks or one `.`), or a
#      continuation piece of a name (letters/digits/underscore glued to the previous token).
#   5. complex logic       — everything else: literals (numbers, string contents), tokens mixing names with
#      operators, i.e. what the completion must work out rather than recall.
IDIOM_PATTERNS = [re.compile(p, re.M) for p in (
    r"\bself\b\.?", r"\bcls\b\.?", r"\bdef __init__\(self\b", r"\bsuper\(\)\.__init__\(",
    r"""\bif __name__ == ['"]__main__['"]:""", r"\bfor \w+ in range\(", r"\bfor \w+, \w+ in enumerate\(",
    r"\bfor \w+(?:, \w+)? in [\w.]+\.items\(\)", r"\brange\(len\(", r"\breturn (?:None|self|True|False)\b",
    r"\bis not None\b", r"\bis None\b", r"^\s*import [\w.]+", r"^\s*from [\w.]+ import\b",
    r"\braise \w+(?:Error|Exception)\(", r"\bexcept (?:\w+(?:Error|Exception)|\(\w+.*?\))(?: as \w+)?:",
    r"\bexcept:", r"\bisinstance\(", r"\blen\(", r"\bwith open\(", r"\.append\(", r"\.join\(",
    r"\.format\(", r"\.get\(", r"\.items\(\)", r"\.keys\(\)", r"\.values\(\)", r"@(?:property|staticmethod|classmethod)\b",
    r"\bdef \w+\(self\b", r"\bprint\(", r"\bnot in\b", r"\belse:", r"\btry:", r"\bfinally:",
)]
BUILTIN_NAMES = frozenset(keyword.kwlist) | {
    "self", "cls", "len", "range", "isinstance", "str", "int", "float", "bool", "dict", "list", "set", "tuple",
    "print", "super", "object", "enumerate", "zip", "sorted", "open", "type", "getattr", "setattr", "hasattr",
    "Exception", "ValueError", "TypeError", "KeyError", "IndexError", "AttributeError", "RuntimeError",
    "NotImplementedError", "OSError", "min", "max", "sum", "any", "all", "map", "iter", "next", "repr",
}
_NAME_PIECE = re.compile(r"\s*\.?[A-Za-z_][A-Za-z0-9_]*|[A-Za-z0-9_]+")
CODE, COMMENT, DOCSTRING, STRING = 0, 1, 2, 3


def lex_regions(text: str) -> np.ndarray:
    """Region of every character of (possibly partial) Python code: CODE, COMMENT, DOCSTRING or STRING.

    A small state machine (not `tokenize`: completions are cut mid-statement); delimiters belong to their
    region. A triple-quoted string is a DOCSTRING when only blanks precede it on its line.
    """
    out = np.zeros(len(text), dtype=np.int8)
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "#":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = COMMENT
            i = j
        elif ch in "'\"":
            triple = text[i : i + 3] in ("'''", '"""')
            quote = text[i : i + 3] if triple else ch
            j = i + len(quote)
            while j < n:
                if text[j] == "\\":
                    j += 2
                    continue
                if text.startswith(quote, j):
                    j += len(quote)
                    break
                if not triple and text[j] == "\n":
                    break
                j += 1
            j = min(j, n)
            line_start = text.rfind("\n", 0, i) + 1
            out[i:j] = DOCSTRING if triple and not text[line_start:i].strip() else STRING
            i = j
        else:
            i += 1
    return out


def idiom_mask(text: str) -> np.ndarray:
    """True for every character inside a match of IDIOM_PATTERNS."""
    mask = np.zeros(len(text), dtype=bool)
    for pat in IDIOM_PATTERNS:
        for m in pat.finditer(text):
            mask[m.start() : m.end()] = True
    return mask


def classify_tokens(code: str, spans: list[tuple[int, int]], special: list[bool]) -> list[str]:
    """The pattern of each token `code[a:b]` (see the rules above); `special[i]` marks a special token."""
    regions, idioms = lex_regions(code), idiom_mask(code)
    out = []
    for (a, b), is_special in zip(spans, special):
        piece = code[a:b]
        if is_special or a >= b:
            out.append("brackets/syntax")
            continue
        solid = [i for i in range(a, b) if not code[i].isspace()]
        where = regions[solid] if solid else regions[a : a + 1]
        if (where == COMMENT).any() or (where == DOCSTRING).any():
            out.append("comments/docstrings")
        elif not re.search(r"[A-Za-z0-9_]", piece):
            out.append("brackets/syntax")
        elif idioms[a:b].any() or piece.strip().lstrip(".") in BUILTIN_NAMES:
            out.append("common idioms")
        elif (where == CODE).all() and _NAME_PIECE.fullmatch(piece) and not piece.strip().isdigit():
            out.append("identifiers")
        else:
            out.append("complex logic")
    return out


def token_spans(tok, prefix: str, ids: list[int]) -> tuple[str, list[tuple[int, int]], list[bool]]:
    """`prefix` + the decoded tokens, each token's character span in it, and which tokens are special."""
    specials = {i for i, t in tok.get_added_tokens_decoder().items() if t.special}
    text, spans, prev = prefix, [], ""
    for j in range(len(ids)):
        cur = tok.decode(ids[: j + 1], skip_special_tokens=True)
        k = 0
        while k < min(len(prev), len(cur)) and prev[k] == cur[k]:
            k += 1
        text = prefix + cur  # a byte-level piece may complete a character the previous piece started
        spans.append((len(prefix) + k, len(prefix) + len(cur)))
        prev = cur
    return text, spans, [i in specials for i in ids]


# ── held-out data ────────────────────────────────────────────────────────────────────────────────────────────
def provenance(model_dir: Path) -> dict:
    f = Path(model_dir) / "quickcode_train.json"
    return json.loads(f.read_text()) if f.exists() else {}


def data_matches(model_dir: Path, data_dir: Path | None) -> bool:
    """`data_dir` was prepared with the model's split: same held-out modules and the same vocabulary."""
    if data_dir is None or not (Path(data_dir) / "manifest.json").exists():
        return False
    mods = set(provenance(model_dir).get("heldout_modules") or [])
    manifest = json.loads((Path(data_dir) / "manifest.json").read_text())
    same_split = not mods or set(manifest["heldout_modules"]) == mods
    same_tok = tokmod.load(Path(data_dir) / "tokenizer").get_vocab() == tokmod.load(Path(model_dir)).get_vocab()
    return same_split and same_tok


def heldout_docs(model_dir: Path, data_dir: Path | None = None) -> list[Document]:
    """The model's held-out documents: from `data_dir` when it belongs to the model (data_matches), else
    rebuilt from the modules its provenance names (stdlib and installed distributions), so committed
    models can be evaluated on a machine that never ran `quickcode model prepare`."""
    if data_matches(model_dir, data_dir):
        return corpus.read_docs(Path(data_dir), "heldout")
    mods = set(provenance(model_dir).get("heldout_modules") or [])
    if not mods:
        raise SystemExit(f"{model_dir} has no provenance (quickcode_train.json) and no data dir matches it")
    docs: list[Document] = []
    for name in sorted({m.split(":", 1)[0] for m in mods}):
        source = "stdlib" if name == "stdlib" else f"site:{name}"
        try:
            _, found, _ = corpus.collect([source], heldout_fraction=1.0)
        except Exception:  # a distribution that is not installed here, or a folder source: skip it
            continue
        docs += [d for d in found if d.module in mods]
    if not docs:
        raise SystemExit(f"none of {model_dir}'s held-out modules can be found on this machine")
    return docs


def fim_cases(model_dir: Path, data_dir: Path | None, n: int, seed: int = 0) -> list[dict]:
    """Held-out fill-in-the-middle cases {path, prefix, suffix, middle} (the same cut as pack.write_fim_eval)."""
    if data_matches(model_dir, data_dir) and (Path(data_dir) / "heldout_fim.jsonl").exists():
        with open(Path(data_dir) / "heldout_fim.jsonl") as f:
            return [json.loads(line) for line, _ in zip(f, range(n))]
    docs = heldout_docs(model_dir, None)
    rng = random.Random(seed)
    pieces = [(d.path, c) for d in docs for c in chunks(d.text, 1500) if len(c) > 200]
    rng.shuffle(pieces)
    out = []
    for path, c in pieces[:n]:
        s = split_for_fim(c, rng, spm_rate=0.0)
        out.append({"path": path, "prefix": s.prefix, "suffix": s.suffix, "middle": s.middle})
    return out


def prompt_ids(model_dir: Path, cases: list[dict], max_prompt_tokens: int,
               fim_policy: str = "always") -> list[list[int]]:
    """Token ids of each case's prompt, built exactly as the backend builds it (quickcode/backend/fim.py; a
    prefix that ends in a space is healed: the completion then starts with that space, see `unheal`)."""
    from quickcode.backend.fim import build_prompt, heal
    from quickcode.backend.fim_templates import FimTemplate

    tok = tokmod.load(Path(model_dir))
    template = FimTemplate.load(Path(model_dir), tok)
    return [build_prompt(tok, template, heal(c["prefix"])[0], c["suffix"], max_prompt_tokens, fim_policy=fim_policy)
            for c in cases]


def unheal(prefix: str, generated: str) -> str:
    """What the backend sends of `generated` for a prompt built by `prompt_ids` from `prefix`: the healed
    space taken off, or nothing when the model did not write it (quickcode/backend/service.py)."""
    from quickcode.backend.fim import Healed, heal

    text = Healed(heal(prefix)[1]).feed(generated)
    return text or ""


def serving_fim_policy() -> str:
    """The backend's default `fim_policy` (how `quickcode serve` prompts the embedded default)."""
    from quickcode.backend.settings import Settings

    return Settings.model_fields["fim_policy"].default


def heldout_windows(model_dir: Path, data_dir: Path | None, seq_len: int, n_windows: int,
                    batch_size: int = 8, docs: list[Document] | None = None) -> list[torch.Tensor]:
    """Fixed held-out windows (plain text) for loss and top-1: the data dir's heldout.bin when it belongs to
    the model, else the provenance's held-out documents (or `docs`, e.g. those several models all held out)
    tokenized here."""
    from quickcode.draft_model.train import Windows

    if docs is None and data_matches(model_dir, data_dir) and (Path(data_dir) / "heldout.bin").exists():
        if len(load_bin(Path(data_dir) / "heldout.bin")) > seq_len + 1:
            return Windows(Path(data_dir) / "heldout.bin", seq_len, 0).fixed(n_windows, batch_size)
    tok = tokmod.load(Path(model_dir))
    eot = tok.token_to_id(template_names(model_dir)["eot_token"])
    ids = [i for d in (docs if docs is not None else heldout_docs(model_dir, None)) for i in [*tok.encode(d.text).ids, eot]]
    arr = np.asarray(ids, dtype=np.int64)
    rng = np.random.default_rng(1234)
    out = []
    for _ in range(max(1, n_windows // batch_size)):
        starts = rng.integers(0, len(arr) - seq_len - 1, batch_size)
        out.append(torch.from_numpy(np.stack([arr[s : s + seq_len + 1] for s in starts])))
    return out


# ── models ───────────────────────────────────────────────────────────────────────────────────────────────────
def load(model_dir: Path):
    from quickcode.draft_model.train import load_model

    m = load_model(Path(model_dir))
    m.eval()
    return m


@torch.no_grad()
def greedy(model, prompt: list[int], max_new_tokens: int, eot_id: int, stop_ids: frozenset[int] = frozenset()) -> list[int]:
    """The model's greedy continuation (KV cache), ending with end-of-text (or a token of `stop_ids`)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    logits = model(input_ids=torch.tensor([prompt]), past_key_values=cache, use_cache=True).logits[0, -1]
    out: list[int] = []
    for _ in range(max_new_tokens):
        nxt = int(logits.argmax())
        out.append(nxt)
        if nxt == eot_id or nxt in stop_ids:
            break
        logits = model(input_ids=torch.tensor([[nxt]]), past_key_values=cache, use_cache=True).logits[0, -1]
    return out


@torch.no_grad()
def draft_agreement(draft, prompt: list[int], continuation: list[int]) -> list[bool]:
    """agree[j]: the draft's greedy token on `prompt + continuation[:j]` is `continuation[j]` (one forward)."""
    if not continuation:
        return []
    ids = torch.tensor([prompt + continuation[:-1]])
    pred = draft(input_ids=ids).logits[0, len(prompt) - 1 :].argmax(-1).tolist()
    return [p == c for p, c in zip(pred, continuation)]


@torch.no_grad()
def decode_step_ms(model, context_tokens: int, steps: int = 24, vocab: int = 100) -> float:
    """Median time of one single-token decode step with a KV cache of `context_tokens` (batch 1)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    model(input_ids=torch.randint(0, vocab, (1, context_tokens)), past_key_values=cache, use_cache=True)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        model(input_ids=torch.randint(0, vocab, (1, 1)), past_key_values=cache, use_cache=True)
        times.append(time.perf_counter() - t0)
        cache.crop(-1)
    return float(np.median(times) * 1000)


# ── speculative decoding, simulated ──────────────────────────────────────────────────────────────────────────
def simulate(agree: list[bool], k: int, n_tokens: int, start: int = 1) -> tuple[list[int], list[str]]:
    """Greedy speculation with K proposals over a completion of `n_tokens` tokens (agree may run longer).

    Returns the accepted count of every draft step and each token's status: "prefill" (the first token, from
    the prompt's forward), "accepted", "rejected" (drafted, mismatched, corrected by the target) or "bonus"
    (the target's extra token after K accepts). Steps start at `start` (vLLM drafts after the prefill token).
    """
    status = ["prefill"] * min(start, n_tokens) + [""] * max(0, n_tokens - start)
    steps, t = [], start
    while t < n_tokens:
        a = 0
        while a < k and t + a < len(agree) and agree[t + a]:
            a += 1
        steps.append(a)
        for j in range(t, min(t + a, n_tokens)):
            status[j] = "accepted"
        if t + a < n_tokens:
            status[t + a] = "bonus" if a == k else "rejected"
        t += a + 1
    return steps, status


def expected_speedup(alpha: float, k: int, c: float) -> float:
    """(1 - α^(K+1)) / ((1 - α)(cK + 1)): expected tokens per target step over the cost of one step."""
    if alpha >= 1.0:
        return (k + 1) / (c * k + 1)
    return (1 - alpha ** (k + 1)) / ((1 - alpha) * (c * k + 1))


def acceptance_tables(records: list[dict], c: float, k_max: int = K_MAX) -> dict:
    """Per K (1..k_max) and per pattern figures from per-case `agree`, `n_tokens` and `patterns`."""
    per_k = []
    for k in range(1, k_max + 1):
        steps_all, acc, rej, bonus = [], 0, 0, 0
        for r in records:
            steps, status = simulate(r["agree"], k, r["n_tokens"])
            steps_all += steps
            acc += status.count("accepted")
            rej += status.count("rejected")
            bonus += status.count("bonus")
        n_steps = len(steps_all)
        alpha = acc / max(1, acc + rej)
        tokens_per_step = (sum(steps_all) + n_steps) / max(1, n_steps)
        per_k.append({
            "k": k, "draft_steps": n_steps, "acceptance_rate": sum(steps_all) / max(1, k * n_steps),
            "alpha": alpha, "mean_accepted": sum(steps_all) / max(1, n_steps), "tokens_per_step": tokens_per_step,
            "expected_speedup": expected_speedup(alpha, k, c), "simulated_speedup": tokens_per_step / (c * k + 1),
        })
    by_pattern = {}
    for k in (5, k_max):
        counts = {p: [0, 0] for p in PATTERNS}  # accepted, drafted (accepted + rejected)
        for r in records:
            _, status = simulate(r["agree"], k, r["n_tokens"])
            for s, p in zip(status, r["patterns"]):
                if s in ("accepted", "rejected"):
                    counts[p][1] += 1
                    counts[p][0] += s == "accepted"
        by_pattern[k] = {p: {"alpha": a / d if d else math.nan, "drafted": d} for p, (a, d) in counts.items()}
    agree_by_pattern = {p: [0, 0] for p in PATTERNS}
    for r in records:
        for j, (g, p) in enumerate(zip(r["agree"][: r["n_tokens"]], r["patterns"])):
            if j >= 1:
                agree_by_pattern[p][0] += g
                agree_by_pattern[p][1] += 1
    total = sum(n for _, n in agree_by_pattern.values())
    patterns = {p: {"alpha_k5": by_pattern[5][p]["alpha"], f"alpha_k{k_max}": by_pattern[k_max][p]["alpha"],
                    "next_token_agreement": a / n if n else math.nan, "tokens": n, "share": n / max(1, total)}
                for p, (a, n) in agree_by_pattern.items()}
    return {"per_k": per_k, "patterns": patterns}


# ── idiom completions ────────────────────────────────────────────────────────────────────────────────────────
# (name, regex over a held-out line, where the cursor goes: the end of group "cut"). The target completes the
# rest of the line between the text before the cursor and the lines after it (a fill-in-the-middle request).
IDIOM_PROMPTS = [
    ("constructor", r"^(?P<cut>\s*def __init__\()self.*$"),
    ("main guard", r"^(?P<cut>if __name__ ==) ['\"]__main__['\"]:$"),
    ("attribute from argument", r"^(?P<cut>\s*self\.(?P<n>\w+) = )(?P=n)$"),
    ("super().__init__", r"^(?P<cut>\s*super\(\)\.)__init__\(.*$"),
    ("for over range", r"^(?P<cut>\s*for \w+ in )range\(.*\):$"),
    ("for over items", r"^(?P<cut>\s*for \w+, \w+ in [\w.]+\.)items\(\):$"),
    ("is not None", r"^(?P<cut>\s*if [\w.]+ is )not None:$"),
    ("return None", r"^(?P<cut>\s*return )None$"),
    ("raise error", r"^(?P<cut>\s*raise )\w+Error\(.*$"),
    ("except clause", r"^(?P<cut>\s*except )\w+(?:Error|Exception)(?: as \w+)?:$"),
    ("with open", r"^(?P<cut>\s*with )open\(.*\) as \w+:$"),
    ("isinstance check", r"^(?P<cut>\s*if )isinstance\(.*\):$"),
    ("property", r"^(?P<cut>\s*@)property$"),
    ("string join", r"^(?P<cut>.*['\"]\.)join\(.*$"),
    ("import from", r"^(?P<cut>from [\w.]+ )import .*$"),
]


def idiom_cases(docs: list[Document], per_kind: int = 5) -> list[dict]:
    """Up to `per_kind` held-out lines per idiom kind, cut at the idiom's cursor (deterministic order)."""
    out = []
    for name, rx in IDIOM_PROMPTS:
        pat, found = re.compile(rx), 0
        for d in sorted(docs, key=lambda d: d.path):
            pos = 0
            for line in d.text.splitlines(keepends=True):
                m = pat.match(line.rstrip("\n"))
                if m and found < per_kind:
                    cut = pos + m.end("cut")
                    eol = pos + len(line.rstrip("\n"))
                    out.append({"kind": name, "path": d.path, "prefix": d.text[:cut], "suffix": d.text[eol:],
                                "expected": d.text[cut:eol]})
                    found += 1
                pos += len(line)
            if found >= per_kind:
                break
    return out


@torch.no_grad()
def complete_idioms(target, model_dir: Path, cases: list[dict], max_prompt_tokens: int,
                    max_new_tokens: int = 24, fim_policy: str | None = None) -> list[dict]:
    """The target's greedy completion of each idiom case, cut at the end of the line, prompted as the backend
    prompts it by default (`fim_policy`)."""
    tok = tokmod.load(Path(model_dir))
    eot = tok.token_to_id(template_names(model_dir)["eot_token"])
    prompts = prompt_ids(model_dir, cases, max_prompt_tokens, fim_policy or serving_fim_policy())
    newline_ids = frozenset(i for t, i in tok.get_vocab().items() if "\n" in tok.decode([i]))
    out = []
    for c, p in zip(cases, tqdm(prompts, desc="idiom completions", unit="case", leave=False)):
        got = tok.decode(greedy(target, p, max_new_tokens, eot, newline_ids), skip_special_tokens=True)
        got = unheal(c["prefix"], got).split("\n")[0]
        line = c["prefix"].split("\n")[-1]
        out.append({**{k: c[k] for k in ("kind", "path", "expected")}, "cursor_line": line,
                    "completion": got, "exact": got.rstrip() == c["expected"].rstrip(),
                    "valid": bool(got.strip()) and valid_line(line + got)})
    return out


def valid_line(line: str) -> bool:
    """Is `line` a complete, valid line of Python where it stands: it parses once given what must surround it
    (`try:` before an `except`, a body after a `:`, a function after a decorator...). A completion that stops
    mid-expression, repeats itself until cut off or mismatches brackets is not."""
    code = line.strip()
    before = after = ""
    first = code.split(" ", 1)[0].rstrip(":")
    if first in ("except", "finally"):
        before = "try:\n    pass\n"
    elif first in ("elif", "else"):
        before = "if x:\n    pass\n"
    if code.startswith("@"):
        after = "\ndef f():\n    pass"
    elif code.endswith(":"):
        after = "\n    pass"
    try:
        ast.parse(before + code + after)
    except (SyntaxError, ValueError):
        return False
    return True


# ── the whole evaluation ─────────────────────────────────────────────────────────────────────────────────────
@dataclass
class EvalConfig:
    n_prompts: int = 40
    max_new_tokens: int = 32
    max_prompt_tokens: int = 512
    k_max: int = K_MAX
    loss_windows: int = 32
    seq_len: int = 512
    idioms_per_kind: int = 4
    seed: int = 0
    threads: int = 1   # torch threads: one, beside a training run on 2 cores (docs/decisions.md#one-thread)


def evaluate_pair(target_dir: Path, draft_dir: Path | None, data_dir: Path | None, cfg: EvalConfig = EvalConfig(),
                  *, cases: list[dict] | None = None) -> dict:
    """Everything offline: target (and draft) held-out loss/top-1, acceptance per K and per pattern, cost
    ratio and speed-ups, idiom completions. Refuses a draft whose vocabulary is not the target's."""
    from quickcode.draft_model.train import evaluate as heldout_eval

    target_dir = Path(target_dir)
    if draft_dir is not None:
        tokmod.check_same_vocab(target_dir, Path(draft_dir))
    torch.manual_seed(cfg.seed)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    tok = tokmod.load(target_dir)
    eot = tok.token_to_id(template_names(target_dir)["eot_token"])
    target = load(target_dir)
    draft = load(draft_dir) if draft_dir is not None else None
    result: dict = {"target": str(target_dir), "draft": str(draft_dir) if draft_dir else None, "config": cfg.__dict__}

    t0 = time.perf_counter()
    windows = heldout_windows(target_dir, data_dir, min(cfg.seq_len, target.config.max_position_embeddings - 1),
                              cfg.loss_windows)
    result["target_heldout"] = heldout_eval(target, windows)
    result["heldout_tokens_scored"] = int(sum(w[:, 1:].numel() for w in windows))
    if draft is not None:
        result["draft_heldout"] = heldout_eval(draft, windows)
    result["loss_s"] = round(time.perf_counter() - t0, 1)

    cases = cases if cases is not None else fim_cases(target_dir, data_dir, cfg.n_prompts, cfg.seed)
    prompts = prompt_ids(target_dir, cases, cfg.max_prompt_tokens)
    records = []
    t0 = time.perf_counter()
    for case, p in zip(cases, tqdm(prompts, desc="offline acceptance", unit="prompt", leave=False)):
        # K_MAX extra tokens so that a step near the end of the completion can see its whole window
        g = greedy(target, p, cfg.max_new_tokens + cfg.k_max, eot)
        n = min(len(g), cfg.max_new_tokens)
        text, spans, special = token_spans(tok, case["prefix"], g[:n])
        rec = {"prompt_tokens": len(p), "tokens": g[:n], "n_tokens": n, "continuation": g,
               "patterns": classify_tokens(text, spans, special)}
        if draft is not None:
            rec["agree"] = draft_agreement(draft, p, g)
        records.append(rec)
    result["generate_s"] = round(time.perf_counter() - t0, 1)
    result["records"] = records
    result["cases"] = cases

    if draft is not None:
        ctx = int(np.median([r["prompt_tokens"] for r in records])) + cfg.max_new_tokens // 2
        t_ms, d_ms = decode_step_ms(target, ctx, vocab=tok.get_vocab_size()), decode_step_ms(draft, ctx, vocab=tok.get_vocab_size())
        result["decode_step_ms"] = {"target": t_ms, "draft": d_ms, "context_tokens": ctx}
        result["cost_ratio"] = d_ms / t_ms
        result.update(acceptance_tables(records, result["cost_ratio"], cfg.k_max))

    docs = heldout_docs(target_dir, data_dir)
    idioms = idiom_cases(docs, cfg.idioms_per_kind)
    done = complete_idioms(target, target_dir, idioms, cfg.max_prompt_tokens)
    result["idioms"] = done
    result["idiom_exact"] = sum(d["exact"] for d in done) / max(1, len(done))
    result["idiom_valid"] = sum(d["valid"] for d in done) / max(1, len(done))
    result["idiom_policy"] = serving_fim_policy()
    if result["idiom_policy"] != "always":    # what infilling every prompt would give (the policy's reason)
        fim = complete_idioms(target, target_dir, idioms, cfg.max_prompt_tokens, fim_policy="always")
        result["idiom_exact_fim_always"] = sum(d["exact"] for d in fim) / max(1, len(fim))
    return result


def compare_draft(result: dict, draft_dir: Path, cfg: EvalConfig = EvalConfig()) -> dict:
    """Acceptance tables of another draft (e.g. one trained from scratch) on the same target trajectories
    as `result` (of evaluate_pair), with its own cost ratio."""
    target_dir = Path(result["target"])
    tokmod.check_same_vocab(target_dir, Path(draft_dir))
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    draft = load(draft_dir)
    cases = result["cases"]
    prompts = prompt_ids(target_dir, cases, cfg.max_prompt_tokens)
    records = [{**r, "agree": draft_agreement(draft, p, r["continuation"])} for r, p in zip(result["records"], prompts)]
    ms = result["decode_step_ms"]
    d_ms = decode_step_ms(draft, ms["context_tokens"], vocab=tokmod.load(target_dir).get_vocab_size())
    return {"draft": str(draft_dir), "cost_ratio": d_ms / ms["target"], "provenance": provenance(draft_dir),
            **acceptance_tables(records, d_ms / ms["target"], cfg.k_max)}


def headline(result: dict) -> dict:
    """The few figures a person reads first."""
    out = {"target_loss": round(result["target_heldout"]["loss"], 4),
           "target_ppl": round(result["target_heldout"]["ppl"], 2),
           "target_top1": round(result["target_heldout"]["top1"], 4),
           "idiom_line_exact": round(result["idiom_exact"], 3), "idiom_line_valid": round(result["idiom_valid"], 3)}
    if "per_k" in result:
        k5 = result["per_k"][4]
        out.update({"draft_loss": round(result["draft_heldout"]["loss"], 4),
                    "acceptance_k5": round(k5["acceptance_rate"], 4), "alpha_k5": round(k5["alpha"], 4),
                    "cost_ratio": round(result["cost_ratio"], 4),
                    "expected_speedup_k5": round(k5["expected_speedup"], 3)})
    return out

