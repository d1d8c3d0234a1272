"""Why a backend refused the language server when waiting will not help — a wrong API token, or a server that is
not a compatible quickcode backend — and what to tell the user, once (the channel shows it as an editor message
and then retries only slowly, until the settings change)."""
from __future__ import annotations

from websockets.exceptions import ConnectionClosed, InvalidStatus

from quickcode.protocol import PROTOCOL_VERSION, Error, ErrorCode, ProtocolError, Welcome

TOKEN, INCOMPATIBLE = "token", "incompatible"
CLOSE_UNAUTHORIZED = 4401      # the backend's close code for a missing or wrong token (quickcode/backend/session.py)


class Refused(ConnectionError):
    def __init__(self, kind: str, detail: str):
        super().__init__(f"{kind}: {detail}")
        self.kind, self.detail = kind, detail


def check_welcome(frame) -> Welcome:
    """The backend's answer to hello, or Refused when it says no for good."""
    if isinstance(frame, Error):
        if frame.code == ErrorCode.UNAUTHORIZED:
            raise Refused(TOKEN, frame.message)
        if frame.code in (ErrorCode.VERSION_MISMATCH, ErrorCode.HELLO_REQUIRED, ErrorCode.UNKNOWN_KIND):
            raise Refused(INCOMPATIBLE, frame.message)
        raise ConnectionError(f"{frame.code}: {frame.message}")     # busy, shutting down…: try again
    if not isinstance(frame, Welcome):
        raise Refused(INCOMPATIBLE, f"it answered hello with {frame.kind!r}")
    if frame.protocol_version != PROTOCOL_VERSION:
        raise Refused(INCOMPATIBLE, f"it speaks protocol {frame.protocol_version}, this language server "
                                    f"{PROTOCOL_VERSION}")
    return frame


def classify(exc: BaseException) -> tuple[str, str] | None:
    """(kind, detail) of a refusal that retrying will not fix; None for a failure worth retrying."""
    if isinstance(exc, Refused):
        return exc.kind, exc.detail
    if isinstance(exc, InvalidStatus):
        code = exc.response.status_code
        if code in (401, 403):
            return TOKEN, f"HTTP {code}"
        if code in (400, 404, 405, 426):
            return INCOMPATIBLE, f"HTTP {code}: no quickcode WebSocket endpoint at that address"
    if isinstance(exc, ConnectionClosed) and exc.rcvd is not None and exc.rcvd.code == CLOSE_UNAUTHORIZED:
        return TOKEN, exc.rcvd.reason or "unauthorized"
    if isinstance(exc, ProtocolError):
        return INCOMPATIBLE, f"its first frame is not quickcode's protocol ({exc})"
    return None


def advice(kind: str, url: str, detail: str) -> str:
    """The editor message for a refusal: what happened and what to do."""
    if kind == TOKEN:
        return (f"quickcode: {url} refused the API token ({detail}). Set the `quickcode.token` setting (or "
                f"$QUICKCODE_TOKEN) to a token from `quickcode token issue`; no completions until then.")
    return (f"quickcode: {url} is not a compatible quickcode backend ({detail}). Point `quickcode.endpoints` at a "
            f"quickcode server of the same version (`quickcode doctor` checks it); no completions until then.")
