"""The closed set of wire messages (protocol version 1). Frozen dataclasses; `kind` is a real field.

Schema evolution: a new field always has a default, so an older peer can decode a newer frame (unknown
fields are ignored) and a newer peer can decode an older one. A breaking change bumps PROTOCOL_VERSION,
which the hello/welcome handshake checks.

Units are in the names: `_ms` milliseconds, `_chars` characters, `_tokens` tokens.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

PROTOCOL_VERSION = 1
DEFAULT_MAX_FRAME_BYTES = 1 << 20


class FinishReason(StrEnum):
    STOP = "stop"                # the model ended the completion (end-of-text or a stop string)
    LENGTH = "length"            # max_tokens reached
    CANCELLED = "cancelled"      # the client sent `cancel` or went away
    SUPERSEDED = "superseded"    # a newer request of the same user replaced it
    SHED = "shed"                # load shedding: answered at once with an empty completion
    ERROR = "error"              # see the `error` frame with the same id


class Priority(StrEnum):
    NORMAL = "normal"
    PREFETCH = "prefetch"        # asked ahead of need: served only from spare capacity


class TelemetryEvent(StrEnum):
    SHOWN = "shown"
    ACCEPTED = "accepted"
    PARTIAL = "partial"          # part of the completion accepted (word or line)
    DISMISSED = "dismissed"


@dataclass(frozen=True, slots=True, kw_only=True)
class Hello:
    """First frame of a session, client → server."""
    kind: Literal["hello"] = "hello"
    protocol_version: int
    client: str = ""             # e.g. "quickcode-lsp/0.1.0 (neovim 0.12)"
    user: str = ""               # only used when the server runs without auth (tokens name the user)


@dataclass(frozen=True, slots=True, kw_only=True)
class Welcome:
    """Server → client answer to `hello`: the session is open."""
    kind: Literal["welcome"] = "welcome"
    protocol_version: int
    session_id: str
    server: str = ""
    model: str = ""
    replica: str = ""
    max_prompt_chars: int = 0    # a longer prefix + suffix + snippets is refused (prompt_too_long)
    max_tokens: int = 0
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    # the served model's prompt budget (its trained context less room for the completion) and the characters
    # of prefix + suffix that fill it: the server cuts a longer prompt, so a client sends windows of at most
    # this size (0: unknown, the client keeps its own)
    max_prompt_tokens: int = 0
    context_chars: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Snippet:
    """Code from another file the user looked at or edited, ranked relevant by the client."""
    path: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Complete:
    """Client → server: complete between `prefix` and `suffix`. `id` is chosen by the client, unique in its
    session."""
    kind: Literal["complete"] = "complete"
    id: str
    prefix: str
    suffix: str = ""
    language: str = ""
    path: str = ""
    max_tokens: int = 64
    stop: list[str] = field(default_factory=list)
    temperature: float = 0.0
    priority: Priority = Priority.NORMAL
    prefill_only: bool = False   # KV warm-up: run the prompt through the engine, generate nothing
    snippets: list[Snippet] = field(default_factory=list)
    # end the request (finish "stop") once its first `max_words` words are written
    # (quickcode/protocol/words.py): the tokens after them would not be shown (0: no limit but max_tokens)
    max_words: int = 0
    # 2..9: the first line only, the best of the greedy line and best_of - 1 sampled ones by how likely they
    # make the code around them (quickcode/backend/rerank.py), sent whole in one chunk (0 or 1: the greedy
    # completion, streamed)
    best_of: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Edit:
    """Client → server: the next edit near the cursor. The model rewrites `region` (the editable region, the
    lines around the cursor) seeing `before` and `after` (the text around it) and `events` (the document's
    recent edits as unified-diff hunks, oldest first); the answer is one `replace` (none: no edit) and `done`.
    Offsets are Python string indices (code points); `cursor_chars` is the cursor's within `region`."""
    kind: Literal["edit"] = "edit"
    id: str
    region: str
    cursor_chars: int = 0
    before: str = ""
    after: str = ""
    events: list[str] = field(default_factory=list)
    language: str = ""
    path: str = ""
    max_tokens: int = 128
    priority: Priority = Priority.NORMAL


@dataclass(frozen=True, slots=True, kw_only=True)
class Replace:
    """Server → client: the answer to an `edit`, sent once before its `done`: `region[start_chars:end_chars]`
    becomes `text` (the model's rewritten region less the common head and tail it kept)."""
    kind: Literal["replace"] = "replace"
    id: str
    start_chars: int
    end_chars: int
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Cancel:
    kind: Literal["cancel"] = "cancel"
    id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Chunk:
    """Server → client: the next piece of completion text for request `id`."""
    kind: Literal["chunk"] = "chunk"
    id: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    """Where the time of one request went (server side). The client adds network time."""
    queue_ms: float = 0.0           # in our admission queue
    tokenize_ms: float = 0.0
    ttft_ms: float = 0.0            # submit to engine → first token (prefill)
    first_decode_ms: float = 0.0    # first → second token
    generate_ms: float = 0.0        # first token → last token
    total_ms: float = 0.0           # frame received → done sent
    prompt_tokens: int = 0
    cached_tokens: int = 0          # prompt tokens served from vLLM's prefix cache
    output_tokens: int = 0
    tokens_per_s: float = 0.0       # output tokens over generate time
    spec_proposed: int = 0          # draft tokens proposed (engine-wide delta while this request ran)
    spec_accepted: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Done:
    kind: Literal["done"] = "done"
    id: str
    finish_reason: FinishReason
    timing: Timing = field(default_factory=Timing)


@dataclass(frozen=True, slots=True, kw_only=True)
class Error:
    """Server → client: a typed error. `id` is set when it concerns one request (which then ends)."""
    kind: Literal["error"] = "error"
    code: str
    message: str
    id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Telemetry:
    """Client → server: what the user did with a shown completion."""
    kind: Literal["telemetry"] = "telemetry"
    event: TelemetryEvent
    id: str = ""
    language: str = ""
    shown_chars: int = 0
    accepted_chars: int = 0


Message = Hello | Welcome | Complete | Edit | Replace | Cancel | Chunk | Done | Error | Telemetry
MESSAGE_TYPES: dict[str, type] = {
    "hello": Hello, "welcome": Welcome, "complete": Complete, "edit": Edit, "replace": Replace,
    "cancel": Cancel,
    "chunk": Chunk, "done": Done, "error": Error, "telemetry": Telemetry,
}
