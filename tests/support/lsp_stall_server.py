"""`quickcode lsp` with an event-loop stall injected between a request's suggestion and its answer (tests only):
`python -m tests.support.lsp_stall_server [quickcode lsp arguments]`, the stall from $QC_TEST_STALL_MS (default 300).

The stall blocks the whole event loop (as a long CPU burst or a GC pause would): edits the editor sends
meanwhile wait unread in the pipe, and the answer must still be checked against them
(quickcode/lsp_client/fresh.py)."""
from __future__ import annotations

import os
import sys
import time

from quickcode.lsp_client import session
from quickcode.lsp_client.cli import main

STALL_S = float(os.environ.get("QC_TEST_STALL_MS", "300")) / 1000
_complete = session.Session.complete


async def _stalled(self, *args, **kwargs):
    s = await _complete(self, *args, **kwargs)
    time.sleep(STALL_S)
    return s


session.Session.complete = _stalled

if __name__ == "__main__":
    sys.exit(main())
