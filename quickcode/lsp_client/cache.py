"""Client-side completion cache: typing through a suggestion costs no request.

Invariant: an entry is served only if the text before the cursor (its prefix window, see context.py) equals
the entry's prefix plus what was typed since, that typed text is a prefix of the entry's completion, and the text after the cursor still
starts as it did (suffix head). The served text is the rest of the completion.

An entry stores the whole streamed completion, not only the part shown: after the user accepts the first
line and presses Enter, the lines after it are served from here ("hot streak"). Keys are the text around
the cursor (the last KEY_CHARS of the prefix + the first KEY_CHARS of the suffix head: bounded on any line
length), one per position inside the completion, in an LRU (lru-dict); every hit is verified against the full
prefix and suffix head, so a key collision can only miss.
"""
from __future__ import annotations

from dataclasses import dataclass

from lru import LRU

KEY_CHARS = 48


@dataclass(frozen=True)
class Entry:
    prefix: str
    suffix_head: str
    completion: str
    source: str = ""     # id of the backend request that produced it


@dataclass(frozen=True)
class Hit:
    entry: Entry
    typed: int           # characters of the completion already typed

    @property
    def remainder(self) -> str:
        return self.entry.completion[self.typed:]


class CompletionCache:
    def __init__(self, max_keys: int = 20_000):
        self.keys: LRU = LRU(max_keys)   # key → list of (entry, typed)
        self.hits = 0
        self.misses = 0

    @staticmethod
    def _key(prefix_tail: str, suffix_head: str) -> str:
        return prefix_tail[-KEY_CHARS:] + "\x00" + suffix_head[:KEY_CHARS]

    def put(self, prefix: str, suffix_head: str, completion: str, source: str = "") -> None:
        if not completion:
            return
        entry = Entry(prefix, suffix_head, completion, source)
        tail = prefix[-KEY_CHARS:]
        for i in range(len(completion)):     # position i: i characters typed, completion[i:] still to come
            k = self._key(tail + completion[:i], suffix_head)
            bucket = self.keys.get(k)
            if bucket is None:
                self.keys[k] = [(entry, i)]
            else:
                bucket.insert(0, (entry, i))
                del bucket[4:]

    def get(self, prefix: str, suffix_head: str) -> Hit | None:
        bucket = self.keys.get(self._key(prefix, suffix_head))
        if bucket:
            for entry, typed in bucket:
                if (len(prefix) == len(entry.prefix) + typed and prefix.startswith(entry.prefix)
                        and entry.completion.startswith(prefix[len(entry.prefix):])
                        and entry.suffix_head == suffix_head):
                    self.hits += 1
                    return Hit(entry, typed)
        self.misses += 1
        return None

    def clear(self) -> None:
        self.keys.clear()
