"""The LSP transport on stdin/stdout, read by the event loop itself (pygls' own reader reads stdin in a thread,
through a buffer nobody can look into).

What matters: before an answer goes out, the server can tell whether the editor has already sent more (an
edit) that it has not read yet (`pending`), and let it be read first (`caught_up`), so the answer is checked
against the document as the editor has it (fresh.py). On stdin that is not a pipe or socket (a file, a
terminal) pygls' own reader serves, and nothing is known to be pending. And as each completion request is read,
where its cursor is in the document then is noted (`ArrivalNoting`): its handler runs later, after edits read
meanwhile.
"""
from __future__ import annotations

import asyncio
import logging
import os
import select
import stat
import sys
import threading
from dataclasses import dataclass

from lsprotocol import types as T
from pygls.io_ import StdoutWriter, run_async
from pygls.protocol import LanguageServerProtocol

log = logging.getLogger("quickcode.lsp")
ASKS = (T.TEXT_DOCUMENT_INLINE_COMPLETION, T.TEXT_DOCUMENT_COMPLETION)
CATCH_UP_STEPS = 200     # event-loop turns an answer waits at most for edits already sent to be read


class _Counting(asyncio.StreamReaderProtocol):
    def __init__(self, reader: asyncio.StreamReader, owner: "PipeReader"):
        super().__init__(reader)
        self.owner = owner

    def data_received(self, data: bytes) -> None:
        self.owner.received += len(data)
        super().data_received(data)


class PipeReader:
    """pygls' reader interface (readline, readexactly) over an asyncio pipe on a file descriptor."""

    def __init__(self, fd: int):
        self.fd = fd
        self.reader = asyncio.StreamReader(limit=1 << 26)
        self.received = 0        # bytes the loop has read from the pipe
        self.consumed = 0        # ... and handed to the protocol

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.connect_read_pipe(lambda: _Counting(self.reader, self), os.fdopen(self.fd, "rb", buffering=0))

    async def readline(self) -> bytes:
        line = await self.reader.readline()
        self.consumed += len(line)
        return line

    async def readexactly(self, n: int) -> bytes:
        try:
            body = await self.reader.readexactly(n)
        except asyncio.IncompleteReadError:
            return b""               # the editor went away mid-message
        self.consumed += len(body)
        return body

    def pending(self) -> bool:
        """Bytes the editor sent that no handler has seen yet (read into our buffer, or still in the pipe)."""
        if self.received > self.consumed:
            return True
        try:
            return bool(select.select([self.fd], [], [], 0)[0])
        except (OSError, ValueError):
            return False


async def caught_up(reader: PipeReader | None) -> None:
    """Let the messages the editor has already sent be read and handled before an answer goes out."""
    for _ in range(CATCH_UP_STEPS):
        if reader is None or not reader.pending():
            return
        await asyncio.sleep(0)


class ArrivalNoting(LanguageServerProtocol):
    """Notes where a completion request's cursor was in the document as the request was read: its handler runs
    later, and edits read meanwhile must not move the document under the request's position."""

    def handle_message(self, message):
        if getattr(message, "method", None) in ASKS and getattr(message, "id", None) is not None:
            self._server.note_arrival(message.id, getattr(message, "params", None))
        super().handle_message(message)


@dataclass(frozen=True)
class Arrival:
    text: str            # the document as the request was read
    offset: int          # the request's position in it


def _is_stream(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def serve(server) -> None:
    """Run `server` (a pygls LanguageServer) on stdio until the editor exits it; `server.input` is the reader."""
    fd = sys.stdin.fileno()
    if not _is_stream(fd):
        server.start_io()
        return
    server._stop_event = threading.Event()     # pygls' exit handler sets it (as in its own start_io)
    server.protocol.set_writer(StdoutWriter(sys.stdout.buffer))

    async def main() -> None:
        server.input = PipeReader(fd)
        await server.input.open()
        await run_async(stop_event=server._stop_event, reader=server.input, protocol=server.protocol, logger=log,
                        error_handler=server.report_server_error)
    try:
        asyncio.run(main())
    except BrokenPipeError:
        log.error("the editor closed the connection; shutting down")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()
