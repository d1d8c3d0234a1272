"""One codec for the wire: orjson, one JSON object per WebSocket frame, validated against the message types.

`decode` never raises anything but `ProtocolError`: a peer's bad frame becomes a typed error, not a crash.
Unknown fields are ignored (a newer peer may add fields with defaults); unknown kinds are refused.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from enum import Enum
from typing import Any, Callable

import orjson

from quickcode.protocol.errors import ErrorCode, ProtocolError
from quickcode.protocol.messages import DEFAULT_MAX_FRAME_BYTES, MESSAGE_TYPES, Message

MAX_ID_CHARS = 128
_Check = Callable[[Any, str], Any]


def encode(msg: Message) -> bytes:
    return orjson.dumps(msg)


def decode(frame: bytes | str, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> Message:
    size = len(frame) if isinstance(frame, bytes) else len(frame.encode("utf-8", "surrogatepass"))
    if size > max_frame_bytes:
        raise ProtocolError(ErrorCode.FRAME_TOO_LARGE, f"frame of {size} bytes exceeds {max_frame_bytes}")
    if isinstance(frame, bytes):
        try:
            frame.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(ErrorCode.NOT_UTF8, f"frame is not UTF-8 (byte {e.start})") from None
    try:
        obj = orjson.loads(frame)
    except orjson.JSONDecodeError as e:
        raise ProtocolError(ErrorCode.BAD_JSON, f"frame is not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(ErrorCode.BAD_JSON, f"a frame is one JSON object, got {type(obj).__name__}")
    rid = obj.get("id") if isinstance(obj.get("id"), str) else None
    kind = obj.get("kind")
    if kind is None:
        raise ProtocolError(ErrorCode.MISSING_FIELD, "missing field 'kind'", rid)
    cls = MESSAGE_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ProtocolError(ErrorCode.UNKNOWN_KIND, f"unknown kind {str(kind)[:40]!r}", rid)
    try:
        return _BUILDERS[cls](obj, "")
    except ProtocolError as e:
        e.id = e.id or rid
        raise


def _fail(code: ErrorCode, path: str, what: str) -> typing.NoReturn:
    raise ProtocolError(code, f"field '{path}': {what}")


def _check_for(tp: Any) -> _Check:
    """A function (value, path) → validated value for one annotated type."""
    origin = typing.get_origin(tp)
    if tp is str:
        return lambda v, p: v if isinstance(v, str) else _fail(ErrorCode.WRONG_TYPE, p, "expected a string")
    if tp is bool:
        return lambda v, p: v if isinstance(v, bool) else _fail(ErrorCode.WRONG_TYPE, p, "expected a boolean")
    if tp is int:
        return lambda v, p: (v if isinstance(v, int) and not isinstance(v, bool)
                             else _fail(ErrorCode.WRONG_TYPE, p, "expected an integer"))
    if tp is float:
        return lambda v, p: (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool)
                             else _fail(ErrorCode.WRONG_TYPE, p, "expected a number"))
    if isinstance(tp, type) and issubclass(tp, Enum):
        allowed = {m.value: m for m in tp}

        def check_enum(v, p):
            if not isinstance(v, str):
                _fail(ErrorCode.WRONG_TYPE, p, "expected a string")
            if v not in allowed:
                _fail(ErrorCode.BAD_VALUE, p, f"{v[:40]!r} is not one of {sorted(allowed)}")
            return allowed[v]
        return check_enum
    if origin is typing.Literal:
        (lit,) = typing.get_args(tp)
        return lambda v, p: v if v == lit else _fail(ErrorCode.BAD_VALUE, p, f"expected {lit!r}")
    if origin is list:
        (item_tp,) = typing.get_args(tp)
        item = _check_for(item_tp)

        def check_list(v, p):
            if not isinstance(v, list):
                _fail(ErrorCode.WRONG_TYPE, p, "expected a list")
            return [item(x, f"{p}[{i}]") for i, x in enumerate(v)]
        return check_list
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        inner = _check_for(args[0])
        return lambda v, p: None if v is None else inner(v, p)
    if dataclasses.is_dataclass(tp):
        return _builder(tp)
    raise TypeError(f"no wire check for {tp!r}")


def _builder(cls: type) -> _Check:
    hints = typing.get_type_hints(cls)
    fields = [(f.name, _check_for(hints[f.name]),
               f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
              for f in dataclasses.fields(cls)]

    def build(obj: Any, path: str):
        if not isinstance(obj, dict):
            _fail(ErrorCode.WRONG_TYPE, path or cls.__name__, "expected an object")
        kwargs = {}
        for name, check, required in fields:
            where = f"{path}.{name}" if path else name
            if name in obj:
                kwargs[name] = check(obj[name], where)
            elif required:
                raise ProtocolError(ErrorCode.MISSING_FIELD, f"missing field '{where}'")
        rid = kwargs.get("id")
        if isinstance(rid, str) and not (0 < len(rid) <= MAX_ID_CHARS):
            _fail(ErrorCode.BAD_VALUE, "id", f"must be 1 to {MAX_ID_CHARS} characters")
        return cls(**kwargs)
    return build


_BUILDERS = {cls: _builder(cls) for cls in MESSAGE_TYPES.values()}
