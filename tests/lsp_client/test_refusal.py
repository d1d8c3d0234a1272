"""Which connection failures are refusals retrying will not fix (shown to the user once), and which are not."""
import pytest
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosedError, InvalidStatus
from websockets.frames import Close
from websockets.http11 import Response

from quickcode.lsp_client.refusal import INCOMPATIBLE, TOKEN, Refused, check_welcome, classify
from quickcode.protocol import PROTOCOL_VERSION, Error, ErrorCode, ProtocolError, Welcome


def status(code: int) -> InvalidStatus:
    return InvalidStatus(Response(code, "x", Headers()))


def test_wrong_tokens_and_other_servers_are_refusals():
    assert classify(status(401))[0] == TOKEN and classify(status(403))[0] == TOKEN
    assert classify(ConnectionClosedError(Close(4401, "unauthorized"), None))[0] == TOKEN
    assert classify(status(404))[0] == INCOMPATIBLE
    assert classify(ProtocolError(ErrorCode.BAD_JSON, "not json"))[0] == INCOMPATIBLE


def test_what_may_pass_is_retried_silently():
    for e in (status(503), ConnectionClosedError(Close(1013, "busy"), None), OSError("refused"), TimeoutError()):
        assert classify(e) is None


def test_the_welcome_decides():
    ok = Welcome(protocol_version=PROTOCOL_VERSION, session_id="s")
    assert check_welcome(ok) is ok
    for frame, kind in ((Welcome(protocol_version=PROTOCOL_VERSION + 1, session_id="s"), INCOMPATIBLE),
                        (Error(code=ErrorCode.VERSION_MISMATCH, message="v"), INCOMPATIBLE),
                        (Error(code=ErrorCode.UNAUTHORIZED, message="u"), TOKEN)):
        with pytest.raises(Refused) as e:
            check_welcome(frame)
        assert e.value.kind == kind
    with pytest.raises(ConnectionError) as e:
        check_welcome(Error(code=ErrorCode.TOO_MANY_SESSIONS, message="full"))
    assert classify(e.value) is None
