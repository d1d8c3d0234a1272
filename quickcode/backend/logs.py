"""How `quickcode serve` logs: text lines or one JSON object a line (`log_format`), and, with `access_log`,
one access line per completion (logger `quickcode.access`: request id, user, route, status, latency parts,
tokens).

In text form each access field is `name=value`, a value quoted (JSON) when it holds anything but plain
characters: a client's request id can never start a line of its own. In JSON form the fields are keys of the
line's object.
"""
from __future__ import annotations

import json
import logging
import re
import sys

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from quickcode.protocol import Timing

ACCESS = logging.getLogger("quickcode.access")
# uvicorn's websockets-sansio logs this at ERROR after each handshake answered with a denial (our 503 while
# the engine starts or the replica drains): it never marks such a handshake complete (Kludex/uvicorn#3138)
DENIAL_NOISE = "ASGI callable returned without completing handshake."
ACCESS_FIELDS = ("request_id", "user", "route", "status", "queue_ms", "ttft_ms", "first_chunk_ms", "total_ms",
                 "prompt_tokens", "cached_tokens", "output_tokens")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_PLAIN = re.compile(r"[\w.:/@+-]+")


def _value(v: object) -> str:
    text = str(v)
    return text if _PLAIN.fullmatch(text) else json.dumps(text)


class TextFormatter(logging.Formatter):
    """The text line, then the access fields of an access record as `name=value`."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = [f"{k}={_value(record.__dict__[k])}" for k in ACCESS_FIELDS if k in record.__dict__]
        return f"{line} {' '.join(fields)}" if fields else line


def json_formatter() -> logging.Formatter:
    """One object a line: time (UTC ISO 8601), level, logger, message, and any extra fields (an access
    record's)."""
    return JsonFormatter(["levelname", "name", "message"], timestamp="time",
                         rename_fields={"levelname": "level", "name": "logger"},
                         reserved_attrs=[*RESERVED_ATTRS, "color_message"])   # uvicorn's ANSI copy of message


class DenialNoise(logging.Filter):
    """Drops uvicorn's `DENIAL_NOISE`: our one WebSocket route always accepts, closes or denies before it
    returns, so the line only ever follows a denial the client got (alerts on ERROR would fire on each)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != DENIAL_NOISE


def quiet_denials() -> None:
    """Install `DenialNoise` on uvicorn's error logger (once; after uvicorn has configured its logging)."""
    log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, DenialNoise) for f in log.filters):
        log.addFilter(DenialNoise())


def configure(level: str, log_format: str) -> None:
    """The process's one handler, on stderr (`quickcode serve`; tests leave logging to pytest)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(json_formatter() if log_format == "json" else TextFormatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())


def access(request_id: str, user: str, route: str, status: str, timing: Timing,
           first_chunk_ms: float) -> None:
    """One access line (`ACCESS_FIELDS`) at info: a request has ended with `status` (its finish reason or
    error code); `first_chunk_ms` from its frame to its first chunk sent (0: none)."""
    ACCESS.info("completion", extra=dict(
        request_id=request_id, user=user, route=route, status=status, queue_ms=timing.queue_ms,
        ttft_ms=timing.ttft_ms, first_chunk_ms=round(first_chunk_ms, 3), total_ms=timing.total_ms,
        prompt_tokens=timing.prompt_tokens, cached_tokens=timing.cached_tokens,
        output_tokens=timing.output_tokens))
