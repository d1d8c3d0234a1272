"""Snippets from recently viewed or edited files, ranked by similarity to the code around the cursor
(Jaccard similarity of identifier sets over sliding windows, as Copilot's neighbouring-tab snippets)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from lru import LRU

from quickcode.protocol import Snippet

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_STOP = frozenset("the and for not def return self none true false import from class with else elif while "
                  "this that var let const function public private static void int str".split())


def words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text) if w.lower() not in _STOP)


@dataclass
class _Doc:
    path: str
    language: str
    text: str
    lines: list[str] | None = None
    windows: list[tuple[int, frozenset[str]]] | None = None   # (first line, words) of each window; lazy


class NeighbourFiles:
    def __init__(self, max_files: int = 20, window_lines: int = 16, step_lines: int = 8):
        self.docs: LRU = LRU(max(1, max_files))     # uri → _Doc, the least recently touched evicted first
        self.max_files = max_files
        self.window_lines = window_lines
        self.step_lines = step_lines
        self._memo: dict[tuple[str, int], list[tuple[str, str]]] = {}

    def touch(self, uri: str, path: str, language: str, text: str) -> None:
        """Record a document the user opened or edited (the most recent); it is indexed when needed."""
        old = self.docs.get(uri)                   # (a get makes it the most recent)
        if self.max_files and (old is None or old.text is not text):
            self.docs[uri] = _Doc(path, language, text)

    def _index(self, doc: _Doc) -> None:
        doc.lines = doc.text.splitlines()
        n, step = self.window_lines, self.step_lines
        doc.windows = [(i, words("\n".join(doc.lines[i:i + n]))) for i in range(0, max(1, len(doc.lines) - n + step), step)]

    def forget(self, uri: str) -> None:
        self.docs.pop(uri, None)

    def for_cursor(self, uri: str, language: str, prefix: str, cursor_line: int, lines: int, k: int) -> list[tuple[str, str]]:
        """`best` for the last `lines` lines of `prefix`, recomputed only when the cursor moves to another block
        of 8 lines (`cursor_line` // 8), so that the prompt's head stays the same from keystroke to keystroke."""
        key = (uri, cursor_line // 8)
        memo = self._memo.get(key)
        if memo is None:
            memo = self.best(uri, language, "\n".join(prefix.splitlines()[-lines:]), k)
            if len(self._memo) > 256:
                self._memo.clear()
            self._memo[key] = memo
        return memo

    def for_context(self, text: str, uri: str, language: str, ctx, lines: int, k: int) -> list[Snippet]:
        """`for_cursor` for a request at `ctx` (a context.Context) in the document `text`."""
        line = text.count("\n", 0, ctx.prefix_start + len(ctx.prefix))
        return [Snippet(path=p, text=t) for p, t in self.for_cursor(uri, language, ctx.prefix, line, lines, k)]

    def best(self, uri: str, language: str, around_cursor: str, k: int, min_score: float = 0.1) -> list[tuple[str, str]]:
        """Up to `k` (path, text) windows of other same-language files, most similar first."""
        query = words(around_cursor)
        if not query:
            return []
        scored = []
        for other, doc in reversed(self.docs.items()):     # the least recent first
            if other == uri or doc.language != language:
                continue
            if doc.windows is None:
                self._index(doc)
            for first, ws in doc.windows:
                if ws:
                    score = len(query & ws) / len(query | ws)
                    if score >= min_score:
                        scored.append((score, doc.path, "\n".join(doc.lines[first:first + self.window_lines])))
        scored.sort(key=lambda t: -t[0])
        return [(path, text) for _, path, text in scored[:k]]
