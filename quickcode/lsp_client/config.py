"""The language server's one typed source of defaults, updated from initializationOptions and
workspace/didChangeConfiguration (section `quickcode`). Keys may be camelCase or snake_case."""
from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass, field

log = logging.getLogger("quickcode.config")


@dataclass
class ClientConfig:
    # backend
    endpoints: list[str] = field(default_factory=lambda: ["ws://127.0.0.1:8765/v1/ws"])
    token: str = ""
    user: str = ""                      # only informative: with auth on, the token names the user
    probe_interval_s: float = 30.0      # re-measure every endpoint's RTT this often (failback)
    # what to complete
    enabled: bool = True
    languages: dict[str, bool] = field(default_factory=dict)   # per language id; missing = enabled
    max_tokens: int = 64
    multiline_max_lines: int = 8
    # what one suggestion shows: "word" (its next word, the following one asked for as it is taken, or served
    # from the same request's look-ahead when there is one; one line at a time), "line" (the rest of the line,
    # or the next line at a line start) or "block" (the whole line or block). A developer takes a suggestion
    # whole; most text shown whole was right for a word or two, then wrong (docs/decisions.md#suggestion-unit)
    suggestion_unit: str = "word"
    # by the word unit, a request generates at most this many tokens (0: max_tokens): the next word, the word
    # after it asked for where it starts, on the text as typed (why: docs/decisions.md#word-max-tokens)
    word_max_tokens: int = 2
    # by the word unit, the server ends a request once this many words are written (0: only word_max_tokens
    # bounds it): the tokens past them are look-ahead, shown only if the developer types on
    # (docs/decisions.md#word-max-words)
    word_max_words: int = 1
    # an inline completion the user invoked (the editor's "trigger suggestion" key) asks for the best of this
    # many lines (the backend's best_of: the greedy line and samples, scored by the code around them), shown
    # whole whatever the suggestion unit. 0/1: off (why: more exact lines, fewer characters taken, slower;
    # docs/decisions.md#explicit-best-of)
    explicit_best_of: int = 0
    hot_streak_lines: int = 0           # lines generated beyond what is shown, for the next positions (each
                                        # costs tokens, most never shown: docs/decisions.md#hot-streak-off)
    deadline_ms: float = 1500.0         # past this the editor gets an empty answer (never an error)
    block_patience_ms: float = 150.0    # a multi-line suggestion shows its complete lines after this (0: whole block)
    line_patience_ms: float = 150.0     # a line still being written shows its complete words after this (0: whole line)
    # timing
    debounce_ms: float = 50.0           # base pause
    debounce_min_ms: float = 0.0
    debounce_max_ms: float = 1000.0
    adaptive_debounce: bool = True      # adjust by typing rhythm and measured backend latency
    learn_pauses: bool = True           # ...and by how long this user pauses at this kind of place (debounce.py)
    pause_min_chance: float = 0.9       # ask where the pause outlasts the time to show text this often
    pause_wait_cap_ms: float = 200.0    # ...but never wait longer than this after a key
                                        # (docs/decisions.md#pause-wait-cap)
    pause_read_ms: float = 0.0          # ...text counts as in time only if shown this long before the next key
                                        # (fewer requests, less accepted: docs/decisions.md#pause-read-off)
    # context
    prefix_max_chars: int = 3000        # ~800 tokens
    suffix_max_chars: int = 800
    window_quantum_lines: int = 16      # windows move in steps of this many lines (stable prompts)
    window_warm_chars: int = 400        # this close to a window move, its next window is prefilled (0: never;
                                        # docs/decisions.md#window-warm)
    snippets: bool = True
    snippet_max: int = 2
    snippet_lines: int = 16
    snippet_max_files: int = 20
    # intelligence (each can be turned off: the typing benchmark's baseline turns them all off)
    cache: bool = True
    cache_max_keys: int = 20_000
    inflight_reuse: bool = True
    cancel_stale: bool = True
    max_inflight_per_doc: int = 2
    prefetch: bool = True
    warmup: bool = True                 # prefill-only request on open, first edit, cursor jump, window move
    predictor: bool = False             # skip places unlikely to be accepted (off: docs/decisions.md#predictor-off)
    # no request is launched with the cursor 1..N characters into a word (0: off; the cache and running
    # requests still answer there): the prompt ends inside a token and the model completes the lone letter as
    # a whole name (`if s` → `if s:`; docs/decisions.md#skip-word-chars)
    skip_word_chars: int = 1
    # mid-word, once this many characters of the word are typed, the rest of it from the document's own
    # identifiers, shown at once without asking the backend (0: off; docwords.py); none there: asked as before
    # (docs/decisions.md#doc-words)
    doc_words_min_chars: int = 1
    predictor_min_ratio: float = 0.5    # skip where p(accept) < this × your own acceptance rate so far
    predictor_exploration: float = 0.1
    # next-edit suggestions (off by default): the edit the user is about to make near the cursor, from the
    # document's recent edits, for `textDocument/copilotInlineEdit` and, where an inline completion has
    # nothing, as an inline completion with a range on the cursor's line
    next_edit: bool = False
    next_edit_lines: int = 3            # lines above and below the cursor's that the edit may change
    next_edit_region_chars: int = 2000  # ... fewer lines while they are longer than this (the model writes
                                        # them all again)
    next_edit_context_chars: int = 1500  # text shown to the model before and after those lines, each
    next_edit_max_tokens: int = 256
    next_edit_history_edits: int = 16   # recent edits kept per document (keystrokes on one line are one)
    next_edit_history_chars: int = 4000  # ... and their characters in all
    state_dir: str = "~/.cache/quickcode"   # the predictor's weights and learnt pauses live here ("" = nowhere)
    telemetry: bool = True

    def language_enabled(self, language: str) -> bool:
        return self.enabled and self.languages.get(language, self.languages.get("*", True))

    def update(self, options: dict | None) -> list[str]:
        """Apply known keys (camelCase or snake_case); return the keys that were ignored."""
        if not isinstance(options, dict):
            return []
        if isinstance(options.get("quickcode"), dict):
            options = options["quickcode"]
        fields = {f.name: f for f in dataclasses.fields(self)}
        ignored = []
        for key, value in options.items():
            name = _snake(key)
            f = fields.get(name)
            if f is None:
                ignored.append(key)
                continue
            current = getattr(self, name)
            try:
                setattr(self, name, _in_range(name, _coerce(value, current)))
            except (TypeError, ValueError, OverflowError):
                log.warning("setting %s=%r has the wrong type or is out of range; keeping %r", key, value, current)
                ignored.append(key)
        if ignored:
            log.info("unknown or invalid settings ignored: %s", ", ".join(ignored))
        return ignored


# what a number setting may be (inclusive); outside, the setting is refused and the old value kept
RANGES = {
    "probe_interval_s": (0.1, 86_400), "max_tokens": (1, 4096), "multiline_max_lines": (1, 1000),
    "hot_streak_lines": (0, 1000), "word_max_tokens": (0, 4096), "deadline_ms": (0, 600_000),
    "block_patience_ms": (0, 600_000),
    "line_patience_ms": (0, 600_000), "debounce_ms": (0, 60_000), "debounce_min_ms": (0, 60_000),
    "debounce_max_ms": (0, 60_000), "pause_min_chance": (0, 1), "pause_read_ms": (0, 5000),
    "prefix_max_chars": (1, 1_000_000),
    "suffix_max_chars": (0, 1_000_000), "window_quantum_lines": (1, 10_000), "window_warm_chars": (0, 1_000_000),
    "snippet_max": (0, 100), "snippet_lines": (1, 1000), "snippet_max_files": (0, 1000),
    "cache_max_keys": (1, 10_000_000), "max_inflight_per_doc": (1, 100), "predictor_min_ratio": (0, 100),
    "predictor_exploration": (0, 1), "skip_word_chars": (0, 64), "word_max_words": (0, 64), "doc_words_min_chars": (0, 64),
    "explicit_best_of": (0, 9), "next_edit_lines": (0, 50), "next_edit_region_chars": (1, 8000),
    "next_edit_context_chars": (0, 100_000), "next_edit_max_tokens": (1, 4096),
    "next_edit_history_edits": (0, 64), "next_edit_history_chars": (0, 100_000),
}


# what a text setting may be; any other value is refused and the old one kept
CHOICES = {"suggestion_unit": ("block", "line", "word")}


def max_words(cfg: ClientConfig, prefill_only: bool = False, line: bool = False) -> int:
    """A request's `max_words`: by the word unit, `word_max_words` (0: no limit; never for a warm-up or a whole
    `line`, best_of)."""
    return cfg.word_max_words if cfg.suggestion_unit == "word" and not (prefill_only or line) else 0


def sizes(cfg: ClientConfig, welcome, prefill_only: bool, best_of: int) -> dict:
    """A request's max_tokens, max_words and best_of (≥ 2: one whole line, the best of that many)."""
    line = best_of > 1 and not prefill_only
    return {"max_tokens": decode_tokens(cfg, welcome, prefill_only, line),
            "max_words": max_words(cfg, prefill_only, line), "best_of": best_of if line else 0}


def decode_tokens(cfg: ClientConfig, welcome, prefill_only: bool = False, line: bool = False) -> int:
    """A request's max_tokens: 1 for a prefill-only warm-up; else the setting within the server's limit, and by
    the word unit at most `word_max_tokens` (when set) — not for a whole `line` (best_of)."""
    if prefill_only:
        return 1
    n = min(cfg.max_tokens, welcome.max_tokens or cfg.max_tokens) if welcome else cfg.max_tokens
    if cfg.suggestion_unit == "word" and cfg.word_max_tokens and not line:
        n = min(n, cfg.word_max_tokens)
    return max(1, n)


def _in_range(name: str, value):
    if name in CHOICES and value not in CHOICES[name]:
        raise ValueError(f"{name} must be one of {', '.join(CHOICES[name])}")
    lo, hi = RANGES.get(name, (None, None))
    if lo is not None and not lo <= value <= hi:      # (NaN is in no range)
        raise ValueError(f"{name} must be within {lo}..{hi}")
    return value


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def _coerce(value, current):
    if isinstance(current, bool):
        if isinstance(value, bool):
            return value
        raise TypeError("bool expected")
    if isinstance(current, (int, float)) and not isinstance(current, bool):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError("number expected")
        return type(current)(value)
    if isinstance(current, str):
        if not isinstance(value, str):
            raise TypeError("string expected")
        return value
    if isinstance(current, list):
        if isinstance(value, str):
            return [value]
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            raise TypeError("a non-empty list of strings expected")
        return list(value)
    if isinstance(current, dict):
        if not isinstance(value, dict) or not all(isinstance(v, bool) for v in value.values()):
            raise TypeError("object of booleans expected")
        return dict(value)
    raise TypeError("unsupported setting type")
