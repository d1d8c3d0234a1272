"""Requests asked ahead of the user, at prefetch priority (the backend serves them with spare capacity):

- KV warm-ups (prefill-only): the first window of a file just opened, the place of the first edit (or a jump far
  away), and the prefix window about to move — so the next prompts find their head in the engine's prefix
  cache instead of prefilling it while the user waits;
- the continuation of an accepted suggestion, so that after Tab the next ghost text is ready.
"""
from __future__ import annotations

from typing import Callable

from quickcode.lsp_client.accounting import Stats
from quickcode.lsp_client.config import ClientConfig
from quickcode.lsp_client.context import Context, prefix_start
from quickcode.lsp_client.telemetry import Shown
from quickcode.protocol import Priority

JUMP_LINES = 30     # an edit this many lines from the last cursor is a new place


class Warmups:
    def __init__(self, cfg: ClientConfig, stats: Stats, docs: dict, context: Callable[..., Context],
                 launch: Callable, known: Callable[[str, Context], bool],
                 windows: Callable[[], tuple[int, int]] | None = None):
        self.cfg, self.stats, self.docs = cfg, stats, docs
        self.context = context     # (doc, offset, text=None, prefix_max_chars=None) → Context
        self.launch = launch       # (doc, ctx, priority=, prefill_only=) → Flight | None
        self.known = known         # (uri, ctx) → the cache or a running request already has this place
        # () → (prefix, suffix) window characters in force (the settings within the server's context)
        self.windows = windows or (lambda: (cfg.prefix_max_chars, cfg.suffix_max_chars))

    def _on(self, language: str) -> bool:
        return self.cfg.warmup and self.cfg.language_enabled(language)

    def warm(self, doc, offset: int, prefix_max_chars: int | None = None) -> None:
        ctx = self.context(doc, offset, prefix_max_chars=prefix_max_chars)
        if self.launch(doc, ctx, priority=Priority.PREFETCH, prefill_only=True) is not None:
            self.stats.warmups += 1

    def opened(self, doc, first_window_end: int) -> None:
        """A file just opened: warm its first window (the editor does not say where the cursor is)."""
        if self._on(doc.language):
            self.warm(doc, first_window_end)

    def edited(self, doc, old_text: str, edit_offset: int | None) -> None:
        """The first edit shows where the cursor is (an editor does not say on open), or it jumped far away:
        warm the KV cache there. Call before `doc.last_cursor` moves to the edit."""
        if edit_offset is None or not self._on(doc.language):
            return
        if doc.last_cursor is None or abs(doc.text.count("\n", 0, edit_offset)
                                          - old_text.count("\n", 0, doc.last_cursor)) > JUMP_LINES:
            self.warm(doc, edit_offset)

    def next_window(self, uri: str) -> None:
        """Within `window_warm_chars` of the prefix window's next move (its start steps down by
        `window_quantum_lines` once the prefix outgrows `prefix_max_chars`), prefill the window it will move
        to, once: the first prompt after the move then finds its head in the engine's prefix cache instead of
        prefilling all of it while the user waits (docs/decisions.md#window-warm). Asked when one of the
        user's requests ends: a prefetch sent beside it would wait for spare capacity and be superseded by the
        next keystroke's request before it ran."""
        doc = self.docs.get(uri)
        if doc is None or doc.last_cursor is None or not self.cfg.warmup or self.cfg.window_warm_chars <= 0:
            return
        offset, q = min(doc.last_cursor, len(doc.text)), self.cfg.window_quantum_lines
        prefix_max = self.windows()[0]
        soon_max = max(1, prefix_max - self.cfg.window_warm_chars)
        soon = prefix_start(doc.text, offset, soon_max, q)
        if soon not in (doc.warmed_start, prefix_start(doc.text, offset, prefix_max, q)):
            doc.warmed_start = soon
            self.warm(doc, offset, prefix_max_chars=soon_max)

    def after_accept(self, shown: Shown) -> None:
        """Ask for the continuation at prefetch priority, on the document as it is once the accept applied."""
        doc = self.docs.get(shown.uri)
        if doc is None:
            return
        i = doc.text.find(shown.prefix + shown.text)
        if i >= 0:
            text, cursor = doc.text, i + len(shown.prefix) + len(shown.text)
        else:
            j = doc.text.find(shown.prefix)
            if j < 0:
                return
            k = j + len(shown.prefix)
            text, cursor = doc.text[:k] + shown.text + doc.text[k + shown.typed:], k + len(shown.text)
        ctx = self.context(doc, cursor, text)
        if not self.known(doc.uri, ctx) and self.launch(doc, ctx, priority=Priority.PREFETCH) is not None:
            self.stats.prefetches += 1
