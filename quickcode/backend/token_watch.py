"""The tokens file while the server runs: polled for a change (and read at once at SIGHUP), each new version
installed whole or not at all, and the sessions of tokens it no longer holds closed.

A version that does not parse, is missing or holds no tokens at all is refused: the previous tokens stay and
the refusal is logged as an error (with `quickcode_auth_tokens_reloads_total{result="refused"}`), so a typo or
a half-written file never locks everyone out. Other users' sessions are never touched by a reload.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from quickcode.backend import metrics
from quickcode.backend.auth import Reloaded, TokenStore, TokensFileError, file_signature

log = logging.getLogger("quickcode.auth")
SETTLE_S = 0.2   # a change seen by polling is read once the file stayed the same this long (an editor's save)


class TokenWatch:
    """`run()` polls every `interval_s` (0: only when `ask()`ed, e.g. at SIGHUP); `revoke(hashes)` closes the
    sessions of tokens that are gone."""

    def __init__(self, store: TokenStore, interval_s: float,
                 revoke: Callable[[frozenset[str]], Awaitable[int]]):
        self.store = store
        self.interval_s = interval_s
        self.revoke = revoke
        self._asked = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        metrics.AUTH_TOKENS.set(len(store.by_hash))

    def ask(self) -> None:
        """Reload now, whatever the file's signature says (callable from a signal handler or another
        thread)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._asked.set)

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        while True:
            try:
                async with asyncio.timeout(self.interval_s if self.interval_s > 0 else None):
                    await self._asked.wait()
            except TimeoutError:
                pass
            forced = self._asked.is_set()
            self._asked.clear()
            try:
                await self.check(forced)
            except Exception:   # never let the watcher die: it is how users are added and removed
                log.exception("the tokens file check failed")

    async def check(self, forced: bool = False) -> Reloaded | None:
        """Reload if the file changed (or `forced`); None when nothing was installed."""
        store = self.store
        assert store.file is not None
        signature = file_signature(store.file)
        if not forced:
            if signature == store.seen:
                return None
            await asyncio.sleep(SETTLE_S)
            if file_signature(store.file) != signature:   # still being written: the next poll reads it
                return None
        store.seen = signature    # a refused version is said once, not at every poll
        try:
            tokens = await asyncio.to_thread(store.read)
        except TokensFileError as e:
            metrics.AUTH_RELOADS.labels("refused").inc()
            log.error("!!! the tokens file was NOT reloaded; the previous %d token(s) stay in force: %s",
                      len(store.by_hash), e)
            return None
        done = store.install(tokens)
        metrics.AUTH_RELOADS.labels("ok").inc()
        metrics.AUTH_TOKENS.set(done.tokens)
        closed = await self.revoke(done.removed) if done.removed else 0
        log.info("tokens reloaded from %s: %d token(s), %d added, %d removed (%d session(s) closed)",
                    store.file, done.tokens, done.added, len(done.removed), closed)
        return done
