"""The language server's records of the keystroke path: an open document (`Doc`), one editor request while it
is being decided (`Ask`), and an answer (`Suggestion`, with the cursor and the document text it applies to)."""
from __future__ import annotations

from dataclasses import dataclass

from quickcode.lsp_client.context import Context
from quickcode.lsp_client.postprocess import Shape


@dataclass(frozen=True)
class Suggestion:
    text: str            # insert at `offset`
    id: str              # names it in telemetry (accept / partial accept / dismiss)
    source: str          # "cache" | "inflight" | "network"
    latency_ms: float
    offset: int = 0      # the cursor it goes at, in `on_text`
    on_text: str = ""    # the document text it applies to (compared by identity: `fresh.settled` checks it)


@dataclass
class Doc:
    uri: str
    path: str
    language: str
    text: str = ""
    generation: int = 0              # bumped by every editor request: an older waiting request gives up
    last_cursor: int | None = None
    warmed_start: int | None = None  # the next prefix window's start, once prefilled ahead of its move


@dataclass
class Ask:
    """One editor request while it is being decided: where, on which text, since when."""
    doc: Doc
    offset: int
    ctx: Context
    shape: Shape
    t0: float
    generation: int
    snapshot: str        # the document text it was asked on (compared by identity: any edit moves on)
    line: bool = False   # the best of several lines, asked for: not what the cache or a running request has

    def superseded(self, docs: dict) -> bool:
        """A newer keystroke or request for this document took over."""
        return self.doc.generation != self.generation or self.doc.text is not self.snapshot \
            or docs.get(self.doc.uri) is not self.doc
