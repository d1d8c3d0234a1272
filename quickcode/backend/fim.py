"""Fill-in-the-middle prompts: prefix/suffix/snippets → token ids, cut to the prompt budget.

Parts are tokenized separately (quickcode/backend/segments.py: fast, exact, cut at line boundaries) and
concatenated in the served model's template (quickcode/backend/fim_templates.py), as in training. A prefix
that ends in a space (and, with `heal_token`, its last token) is healed (`heal`): the model writes it again,
with what follows.
"""
from __future__ import annotations

from itertools import chain

from tokenizers import Tokenizer

from quickcode.backend.eol import to_lf
from quickcode.backend.fim_templates import FimTemplate
from quickcode.backend.heal_mask import TokenTexts, token_texts
from quickcode.backend.segments import keep_head, keep_tail

_COMMENT = {  # line-comment marker per language id, for snippets from other files
    "python": "#", "shellscript": "#", "bash": "#", "sh": "#", "ruby": "#", "perl": "#", "r": "#",
    "yaml": "#", "toml": "#", "dockerfile": "#", "makefile": "#", "elixir": "#",
    "lua": "--", "sql": "--", "haskell": "--",
}


def render_snippets(snippets: list[tuple[str, str]], language: str) -> str:
    """Other files' code as comments above the prefix (model-agnostic, as Copilot's neighbouring tabs)."""
    c = _COMMENT.get(language, "//" if language else "#")
    out = []
    for path, text in snippets:
        out.append(f"{c} Path: {path}\n" + "".join(f"{c} {line}\n" for line in text.splitlines()))
    return "".join(out)


def heal(prefix: str, space: bool = True, tok: Tokenizer | None = None,
         texts: TokenTexts | None = None, line_end: bool = True) -> tuple[str, str]:
    """Token healing: (prefix to prompt with, text the completion must start with, which is then removed
    from it). Whatever is given back the model writes again, so the prompt ends where training tokens end
    (why and figures: docs/decisions.md#heal-token and the heal-* entries beside it).

    - A prefix ending in a space (`space`) leaves that space out: a byte-level pre-tokenizer keeps it with the
      next word (` return`), so a lone ` ` token is something training never had.
    - With `tok` (setting `heal_token`), a prefix ending in anything else gives back its last pre-tokenizer
      piece (`super().` → `super` + `().`, `x = sel` → `x =` + ` sel`); the engine then lets the model write
      only tokens that agree with that text (quickcode/backend/vllm_logits.py). Not healed: whitespace other
      than a line end, a piece longer than HEAL_MAX_CHARS, and non-ASCII text (a byte-level token may hold
      part of a character).
    - A prefix ending in a line end (`line_end`) gives back its trailing whitespace: the newline is written
      with the indentation the model wants.
    - With `texts` (the vocabulary), only as much is given back as one token can write (llama.cpp's "dynamic"
      token healing): the piece's tokens from the last one back while their text is the start of some token
      (` se` `l` → ` sel`; `control` `Char` `P` → `P`), nothing when no token is longer than that text."""
    if prefix.endswith(" "):
        return (prefix[:-1], " ") if space else (prefix, "")
    if tok is None or not prefix or prefix[-1] in "\t\r":
        return prefix, ""
    if prefix[-1] == "\n":
        return _heal_line_end(prefix, tok, texts) if line_end else (prefix, "")
    line = prefix[prefix.rfind("\n") + 1:][-HEAL_WINDOW_CHARS:]
    pieces = tok.pre_tokenizer.pre_tokenize_str(line) if tok.pre_tokenizer is not None else []
    if not pieces:
        return prefix, ""
    start, end = pieces[-1][1]
    last = line[start:]
    if end != len(line) or not last.strip() or len(last) > HEAL_MAX_CHARS or not last.isascii():
        return prefix, ""
    if texts is not None:
        last = _one_token_tail(last, tok, texts)
        if not last:
            return prefix, ""
    return prefix[:-len(last)], last


def _heal_line_end(prefix: str, tok: Tokenizer, texts: TokenTexts | None) -> tuple[str, str]:
    """`heal` of a prefix ending in a newline: its trailing whitespace (one pre-tokenizer piece: blank lines,
    a blank line's spaces, the newline; ASCII only, as `heal`), at most HEAL_MAX_CHARS of it, as much as one
    token can write."""
    tail = prefix[-HEAL_MAX_CHARS:]
    run = tail[len(tail.rstrip(" \t\n")):]
    if texts is not None:
        run = _one_token_tail(run, tok, texts)
    return (prefix[:-len(run)], run) if run else (prefix, "")


def _one_token_tail(piece: str, tok: Tokenizer, texts: TokenTexts) -> str:
    """The longest run of `piece`'s last tokens whose text some longer token starts with ("" for none)."""
    starts = [a for a, _ in tok.encode(piece, add_special_tokens=False).offsets]
    tail = ""
    for a in reversed(starts):
        if not any(len(texts.texts[i]) > len(piece) - a for i in texts.starting_with(piece[a:])):
            break
        tail = piece[a:]
    return tail


HEAL_MAX_CHARS = 24       # a piece longer than this is not given back (its start is settled)
HEAL_WINDOW_CHARS = 256   # the end of the cursor's line that is tokenized to find its last token (bounded on
                          # any line length; the pre-tokenizer's pieces are far shorter)


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
    """Whether a completion is asked as fill-in-the-middle. `always`; or `mid_line`: only when text follows
    the cursor on its line — at the end of a line the prompt is the plain prefix (the lines below are not
    shown to the model), for models whose left-to-right completion is much better than their infilling (the
    embedded default's tiny target: 9/60 held-out idiom lines exact from the plain prefix, 0/60 as FIM);
    `never`: the plain prefix only, for a model with no FIM tokens (the text after the cursor not shown)."""
    if policy in ("always", "never"):
        return policy == "always"
    nl = suffix.find("\n")          # the rest of the cursor's line, without copying the (long) file's rest
    return bool((suffix if nl < 0 else suffix[:nl]).strip())


def _file_blocks(tok: Tokenizer, t: FimTemplate, files: list[tuple[str, str]], path: str,
                 budget: int) -> list[int]:
    """Other files in the family's repository format (`<file>path\ntext\n` each, then `<file>path\n` of the
    file being edited), the last files kept first when over `budget`, the oldest kept one cut to its tail."""
    head = [t.file_id, *tok.encode(f"{path}\n").ids] if path else []
    left = budget - len(head)
    blocks: list[list[int]] = []
    for p, text in reversed(files):
        ids = [t.file_id, *tok.encode(f"{p}\n").ids]
        if left - len(ids) < 8:            # not even a few lines of this file: stop here
            break
        body = keep_tail(tok, text if text.endswith("\n") else text + "\n", left - len(ids))
        blocks.append(ids + body)
        left -= len(ids) + len(body)
    return [*chain.from_iterable(reversed(blocks)), *head] if left >= 0 else []


def build_prompt(tok: Tokenizer, t: FimTemplate, prefix: str, suffix: str, max_prompt_tokens: int,
                 snippets_text: str = "", fim_policy: str = "always",
                 files: list[tuple[str, str]] | None = None, path: str = "") -> list[int]:
    """The prompt for one completion. Budget: suffix ≤ 1/4, snippets ≤ 1/4, the prefix takes the rest.
    Other files come as `files` (path, text) for a template with a file token, else as `snippets_text`."""
    bos = [t.bos_id] if t.bos_id is not None else []
    budget = max_prompt_tokens - 4 - len(bos)
    if files and t.file_id is not None:
        snip, ctx = [], _file_blocks(tok, t, files, path, budget // 4)
    else:
        snip, ctx = (keep_tail(tok, snippets_text, budget // 4) if snippets_text else []), []
    used = len(snip) + len(ctx)
    if t.prefix_only or not uses_fim(fim_policy, suffix):    # a model with no FIM tokens: never infilled
        return [*bos, *ctx, *snip, *keep_tail(tok, prefix, budget - used)]
    suf = keep_head(tok, suffix, budget // 4) if suffix else []
    pre = keep_tail(tok, prefix, budget - len(suf) - used)
    return fim_layout(t, pre, suf, snip, [*bos, *ctx])


def fim_layout(t: FimTemplate, pre: list[int], suf: list[int], snip: list[int] = (),
               head: list[int] = ()) -> list[int]:
    """The FIM parts in the template's order, ending where the completion starts: the one layout both the
    served prompt (`build_prompt`) and the training samples (quickcode/draft_model/pack.py) are made of."""
    mid = [t.middle_id] if t.middle_id is not None else []
    if t.order == "spm":
        return [*head, t.suffix_id, *suf, t.prefix_id, *snip, *pre, *(mid if t.spm_middle else [])]
    return [*head, t.prefix_id, *snip, *pre, t.suffix_id, *suf, *mid]


def complete_prompt(msg, s, tok: Tokenizer, t: FimTemplate, budget: int) -> tuple[list[int], str]:
    """A `Complete`'s prompt ids on the settings `s`, and the text given back to the model (`heal`). The
    model is shown LF only (quickcode/backend/eol.py); other files in the family's own file-separator format
    where it has one, else as comments."""
    files = [(x.path, to_lf(x.text)) for x in msg.snippets]
    snippets = render_snippets(files, msg.language) if files and t.file_id is None else ""
    heal_tok = tok if s.heal_token else None
    prefix, healed = heal(to_lf(msg.prefix), s.heal_space, heal_tok,
                          token_texts(heal_tok) if heal_tok else None, s.heal_line_end)
    ids = build_prompt(tok, t, prefix, to_lf(msg.suffix), budget, snippets, s.fim_policy,
                       files=files if t.file_id is not None else None, path=msg.path)
    return ids, healed
