"""The wire vocabulary shared by the language server and the backend (imports nothing else of the project);
and, as the one layer every package may import, `stats.percentile`, the percentile all reports use, and
edit_window.py, how a client shapes a next-edit request (which the edit model's training data shows too)."""
from quickcode.protocol.budget import within_budget
from quickcode.protocol.codec import MAX_ID_CHARS, decode, encode
from quickcode.protocol.errors import ErrorCode, ProtocolError
from quickcode.protocol.messages import (
    DEFAULT_MAX_FRAME_BYTES, MESSAGE_TYPES, PROTOCOL_VERSION, Cancel, Chunk, Complete, Done, Edit, Error,
    FinishReason, Hello, Message, Priority, Replace, Snippet, Telemetry, TelemetryEvent, Timing,
    Welcome,
)

__version__ = "0.1.0"   # quickcode's release, which both sides report (the wire's own is PROTOCOL_VERSION)

__all__ = [
    "__version__",
    "MAX_ID_CHARS", "decode", "encode", "ErrorCode", "ProtocolError", "DEFAULT_MAX_FRAME_BYTES",
    "MESSAGE_TYPES",
    "PROTOCOL_VERSION", "Cancel", "Chunk", "Complete", "Done", "Edit", "Error", "FinishReason", "Hello",
    "Message", "Priority", "Replace", "Snippet", "Telemetry", "TelemetryEvent", "Timing", "Welcome",
    "within_budget",
]
