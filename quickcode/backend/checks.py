"""What a `Complete` or an `Edit` may ask, checked before anything is spent on it: each bad field a typed
error that names it (the client's request is refused, the session lives on)."""
from __future__ import annotations

import re

from quickcode.backend import best_of
from quickcode.backend.settings import Settings
from quickcode.protocol import Complete, Edit, ErrorCode, ProtocolError

MAX_STOP_STRINGS, MAX_STOP_CHARS = 8, 64
MAX_PATH_CHARS = 4096      # PATH_MAX: a file-token template encodes the path (outside max_prompt_chars)
MAX_EDIT_EVENTS = 64       # recent edits of one next-edit request (the client keeps fewer)
MAX_REGION_CHARS = 8192    # an editable region: the model writes it whole again, so it stays a few lines
_SURROGATE = re.compile("[\ud800-\udfff]")     # no valid text holds one alone (a tokenizer raises on it)


def _lone_surrogate(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None   # isascii: a flag, ~9 ns


def as_usv(text: str) -> str:
    """`text` as the web reads a JSON string (WHATWG USVString): each lone surrogate, which Python's json
    parser lets through (orjson refuses it), becomes U+FFFD."""
    if not _lone_surrogate(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def check_complete(msg: Complete, s: Settings) -> None:
    """Raise ProtocolError for the first field out of its bounds (`s`: the server's limits)."""
    if not 0 < msg.max_tokens <= s.max_tokens_limit:
        raise ProtocolError(
            ErrorCode.MAX_TOKENS_TOO_LARGE,
            f"max_tokens must be 1..{s.max_tokens_limit}, got {msg.max_tokens}", msg.id)
    chars = len(msg.prefix) + len(msg.suffix) + sum(len(sn.text) + len(sn.path) for sn in msg.snippets)
    if chars > s.max_prompt_chars:
        raise ProtocolError(ErrorCode.PROMPT_TOO_LONG,
                            f"prompt of {chars} characters exceeds {s.max_prompt_chars}", msg.id)
    if not 0.0 <= msg.temperature <= 2.0:
        raise ProtocolError(ErrorCode.BAD_VALUE, "temperature must be within 0..2", msg.id)
    if not 0 <= msg.max_words <= s.max_tokens_limit:
        raise ProtocolError(ErrorCode.BAD_VALUE, f"max_words must be 0..{s.max_tokens_limit}",
                            msg.id)
    if not 0 <= msg.best_of <= best_of.MAX_BEST_OF:
        raise ProtocolError(ErrorCode.BAD_VALUE, f"best_of must be 0..{best_of.MAX_BEST_OF}", msg.id)
    if len(msg.stop) > MAX_STOP_STRINGS or any(not x or len(x) > MAX_STOP_CHARS for x in msg.stop):
        raise ProtocolError(
            ErrorCode.BAD_VALUE,
            f"stop: at most {MAX_STOP_STRINGS} non-empty strings of ≤ {MAX_STOP_CHARS} chars", msg.id)
    if len(msg.path) > MAX_PATH_CHARS or len(msg.language) > MAX_PATH_CHARS:
        raise ProtocolError(ErrorCode.BAD_VALUE, f"path and language: at most {MAX_PATH_CHARS} characters",
                            msg.id)
    texts = (msg.prefix, msg.suffix, msg.path, msg.language, *msg.stop,
             *(t for sn in msg.snippets for t in (sn.path, sn.text)))
    if any(map(_lone_surrogate, texts)):
        raise ProtocolError(ErrorCode.BAD_VALUE, "the text holds a lone UTF-16 surrogate: not valid Unicode",
                            msg.id)


def check_edit(msg: Edit, s: Settings) -> None:
    """Raise ProtocolError for the first field of a next-edit request out of its bounds."""
    if not 0 < msg.max_tokens <= s.max_tokens_limit:
        raise ProtocolError(
            ErrorCode.MAX_TOKENS_TOO_LARGE,
            f"max_tokens must be 1..{s.max_tokens_limit}, got {msg.max_tokens}", msg.id)
    if len(msg.region) > MAX_REGION_CHARS:
        raise ProtocolError(ErrorCode.PROMPT_TOO_LONG,
                            f"an editable region is at most {MAX_REGION_CHARS} characters", msg.id)
    if not 0 <= msg.cursor_chars <= len(msg.region):
        raise ProtocolError(ErrorCode.BAD_VALUE, "cursor_chars must lie within the region", msg.id)
    if len(msg.events) > MAX_EDIT_EVENTS:
        raise ProtocolError(ErrorCode.BAD_VALUE, f"events: at most {MAX_EDIT_EVENTS}", msg.id)
    chars = len(msg.region) + len(msg.before) + len(msg.after) + sum(map(len, msg.events))
    if chars > s.max_prompt_chars:
        raise ProtocolError(ErrorCode.PROMPT_TOO_LONG,
                            f"prompt of {chars} characters exceeds {s.max_prompt_chars}", msg.id)
    if len(msg.path) > MAX_PATH_CHARS or len(msg.language) > MAX_PATH_CHARS:
        raise ProtocolError(ErrorCode.BAD_VALUE, f"path and language: at most {MAX_PATH_CHARS} characters",
                            msg.id)
    if any(map(_lone_surrogate, (msg.region, msg.before, msg.after, msg.path, msg.language, *msg.events))):
        raise ProtocolError(ErrorCode.BAD_VALUE, "the text holds a lone UTF-16 surrogate: not valid Unicode",
                            msg.id)
