"""The one error taxonomy of the wire: every failure a peer can see is a `ProtocolError` with a code."""
from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    # the frame itself
    NOT_UTF8 = "not_utf8"
    FRAME_TOO_LARGE = "frame_too_large"
    BODY_TOO_LARGE = "body_too_large"          # HTTP: the request body is over max_body_bytes (413)
    BAD_JSON = "bad_json"
    UNKNOWN_KIND = "unknown_kind"
    MISSING_FIELD = "missing_field"
    WRONG_TYPE = "wrong_type"
    BAD_VALUE = "bad_value"
    # the session
    VERSION_MISMATCH = "version_mismatch"
    HELLO_REQUIRED = "hello_required"
    UNAUTHORIZED = "unauthorized"
    RATE_LIMITED = "rate_limited"
    TOO_MANY_SESSIONS = "too_many_sessions"    # the server's or this user's session cap (then close 1013)
    # a request
    PROMPT_TOO_LONG = "prompt_too_long"
    MAX_TOKENS_TOO_LARGE = "max_tokens_too_large"
    DUPLICATE_ID = "duplicate_id"
    UNKNOWN_ID = "unknown_id"
    # the server
    ENGINE_UNAVAILABLE = "engine_unavailable"
    SHUTTING_DOWN = "shutting_down"
    INTERNAL = "internal"


class ProtocolError(Exception):
    """A typed failure: `code` is machine-readable, `message` is for people, `id` names the request if
    known."""

    def __init__(self, code: ErrorCode, message: str, id: str | None = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.id = id
