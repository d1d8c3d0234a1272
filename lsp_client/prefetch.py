"""When to ask early: likely pause points (ask without waiting), and the continuation of a completion as if
it were accepted (asked ahead, at prefetch priority, so that after Tab the next ghost text is ready)."""
from __future__ import annotations

import re

_PAUSE_CHARS = set("(:.,=[{")
_IDENT_THEN_SPACE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\s$")


def is_pause_point(line_prefix: str) -> bool:
    """True where people usually stop typing and wait: after an opener or separator, at the start of a
    fresh (possibly indented) line, or at the end of a word (keyword or identifier) followed by a space."""
    if not line_prefix.strip():
        return True                                   # new line (auto-indented)
    last = line_prefix[-1]
    if last in _PAUSE_CHARS:
        return True
    if line_prefix.endswith(("->", "=>", ":=")):
        return True
    return bool(_IDENT_THEN_SPACE.search(line_prefix))   # a word (keyword or name) just ended


def accepted_prefix(prefix: str, shown: str) -> str:
    """The prefix window the editor will have after the shown completion is accepted."""
    return prefix + shown
