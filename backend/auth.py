"""Per-user API tokens: issued once, stored only as SHA-256 hashes, checked at the WebSocket handshake and
on HTTP endpoints.

File format (one entry a line, `#` comments): `<user>:<sha256 hex of the token>`. Tokens are 32 random bytes
(urlsafe base64, prefixed `qc_`), so a plain hash is enough: there is nothing to brute-force.
"""
from __future__ import annotations

import hashlib
import secrets
from pathlib import Path

TOKEN_PREFIX = "qc_"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def parse_entries(text: str) -> dict[str, str]:
    """hash → user."""
    out = {}
    for line in text.replace(",", "\n").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, _, digest = line.rpartition(":")
        if user and len(digest) == 64:
            out[digest.lower()] = user
    return out


class TokenStore:
    """`enabled` is False when no tokens are configured: the server is open (meant for loopback only)."""

    def __init__(self, file: Path | None = None, inline: str = ""):
        self.file = file
        self.by_hash: dict[str, str] = parse_entries(inline)
        if file is not None:
            self.by_hash.update(parse_entries(file.read_text()))
        self.enabled = file is not None or bool(inline)

    def user_for(self, token: str | None) -> str | None:
        if not token:
            return None
        return self.by_hash.get(hash_token(token))


def token_from_headers(headers, query_params) -> str | None:
    """`Authorization: Bearer <token>` or, for clients that cannot set headers, `?token=<token>`."""
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return query_params.get("token") or None


def issue(file: Path, user: str) -> str:
    """Append a new token for `user` to `file` (hash only) and return the token, to be shown once."""
    if ":" in user or not user.strip():
        raise ValueError("a user name is non-empty and has no ':'")
    token = new_token()
    file.parent.mkdir(parents=True, exist_ok=True)
    with open(file, "a") as f:
        f.write(f"{user}:{hash_token(token)}\n")
    file.chmod(0o600)
    return token


def revoke(file: Path, user: str) -> int:
    lines = file.read_text().splitlines()
    keep = [line for line in lines if line.strip().startswith("#") or line.rpartition(":")[0] != user]
    file.write_text("".join(f"{line}\n" for line in keep))
    return len(lines) - len(keep)
