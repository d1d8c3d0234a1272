"""Per-user API tokens: issued once, stored only as SHA-256 hashes, checked at the WebSocket handshake and
on HTTP endpoints.

File format (one entry a line, `#` comments): `<user>:<sha256 hex of the token>[:<team>]`. The team names the
prefix-cache tenant when `cache_isolation = "team"` (backend/tenancy.py); without one a user is their own
team. Tokens are 32 random bytes (urlsafe base64, prefixed `qc_`), so a plain hash is enough: there is nothing
to brute-force. The file is created 0600 (never world-readable, not even for a moment).
"""
from __future__ import annotations

import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

TOKEN_PREFIX = "qc_"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a token belongs to: the user (rate limits, session caps) and their team (the cache tenant)."""
    user: str
    team: str


def parse_entries(text: str) -> dict[str, Identity]:
    """hash → identity. Lines: `user:sha256hex` or `user:sha256hex:team`."""
    out = {}
    for line in text.replace(",", "\n").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(":")
        if len(parts) not in (2, 3):
            continue
        user, digest = parts[0].strip(), parts[1].strip()
        team = parts[2].strip() if len(parts) == 3 and parts[2].strip() else user
        if user and len(digest) == 64:
            out[digest.lower()] = Identity(user, team)
    return out


class TokenStore:
    """`enabled` is False when no tokens are configured: the server is open (meant for loopback only)."""

    def __init__(self, file: Path | None = None, inline: str = ""):
        self.file = file
        self.by_hash: dict[str, Identity] = parse_entries(inline)
        if file is not None:
            self.by_hash.update(parse_entries(file.read_text()))
        self.enabled = file is not None or bool(inline)
        self.team_of: dict[str, str] = {i.user: i.team for i in self.by_hash.values()}

    def user_for(self, token: str | None) -> str | None:
        if not token:
            return None
        ident = self.by_hash.get(hash_token(token))
        return ident.user if ident else None


def token_from_headers(headers, query_params) -> str | None:
    """`Authorization: Bearer <token>` or, for clients that cannot set headers, `?token=<token>`."""
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return query_params.get("token") or None


def _open_private(file: Path, flags: int):
    """Open for writing, created 0600 by open(2) itself: no moment where another user could read it."""
    return os.fdopen(os.open(file, flags | os.O_WRONLY | os.O_CREAT, 0o600), "w")


def issue(file: Path, user: str, team: str = "") -> str:
    """Append a new token for `user` (of `team`) to `file` (hash only) and return the token, to be shown
    once."""
    for name, value in (("user", user), ("team", team)):
        if ":" in value or "," in value or any(c.isspace() for c in value):
            raise ValueError(f"a {name} name has no ':', ',' or spaces")
    if not user:
        raise ValueError("a user name is non-empty")
    token = new_token()
    file.parent.mkdir(parents=True, exist_ok=True)
    with _open_private(file, os.O_APPEND) as f:
        f.write(f"{user}:{hash_token(token)}{':' + team if team else ''}\n")
    return token


def revoke(file: Path, user: str) -> int:
    lines = file.read_text().splitlines()
    keep = [line for line in lines if line.strip().startswith("#") or line.split(":")[0].strip() != user]
    tmp = file.with_name(file.name + ".tmp")
    tmp.unlink(missing_ok=True)
    with _open_private(tmp, os.O_EXCL) as f:
        f.write("".join(f"{line}\n" for line in keep))
    os.replace(tmp, file)
    return len(lines) - len(keep)
