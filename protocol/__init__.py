"""The wire vocabulary shared by the language server and the backend (imports nothing else of the project)."""
from protocol.codec import MAX_ID_CHARS, decode, encode
from protocol.errors import ErrorCode, ProtocolError
from protocol.messages import (
    DEFAULT_MAX_FRAME_BYTES, MESSAGE_TYPES, PROTOCOL_VERSION, Cancel, Chunk, Complete, Done, Error,
    FinishReason, Hello, Message, Priority, Snippet, Telemetry, TelemetryEvent, Timing, Welcome,
)

__all__ = [
    "MAX_ID_CHARS", "decode", "encode", "ErrorCode", "ProtocolError", "DEFAULT_MAX_FRAME_BYTES", "MESSAGE_TYPES",
    "PROTOCOL_VERSION", "Cancel", "Chunk", "Complete", "Done", "Error", "FinishReason", "Hello", "Message",
    "Priority", "Snippet", "Telemetry", "TelemetryEvent", "Timing", "Welcome",
]
