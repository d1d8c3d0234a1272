"""Per-user API tokens: issued once, stored only as SHA-256 hashes, checked at the WebSocket handshake and
on HTTP endpoints.

File format (one entry a line, `#` comments): `<user>:<sha256 hex of the token>[:<team>]`. The team names the
prefix-cache tenant when `cache_isolation = "team"` (quickcode/backend/tenancy.py); without one a user is
their own team. Tokens are 32 random bytes (urlsafe base64, prefixed `qc_`), so a plain hash is enough: there
is nothing to brute-force. The file is created 0600 (never world-readable, not even for a moment).
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


MAX_TOKENS_FILE_BYTES = 16 << 20   # a tokens file is a few bytes a user: anything bigger is not one
MAX_PROBLEMS_SHOWN = 10            # a garbage file is named by its first few bad lines, not all of them
_HEX = frozenset("0123456789abcdef")
_NAME_BAD = frozenset(":,") | frozenset(" \t\r\n\v\f")


class TokensFileError(ValueError):
    """The tokens (a file, or `auth_tokens`) do not parse: each bad line by number and what is wrong with it,
    never its text (a line might be a token pasted by mistake)."""


def _problem(user: str, digest: str, team: str) -> str | None:
    if not user or any(c in _NAME_BAD or not c.isprintable() for c in user + team):
        return "a user (or team) name is empty or holds spaces, ':', ',' or control characters"
    if digest.startswith(TOKEN_PREFIX):
        return "this looks like a token itself, not its hash: store hashes only (`quickcode token issue`)"
    if len(digest) != 64 or not set(digest.lower()) <= _HEX:
        return "the hash is not 64 hex digits (the SHA-256 of the token)"
    return None


def parse_entries(text: str, source: str = "auth_tokens") -> dict[str, Identity]:
    """hash → identity. Lines (or comma-separated entries): `user:sha256hex` or `user:sha256hex:team`; `#`
    starts a comment line. Raises TokensFileError naming every bad line (the first few of them)."""
    out: dict[str, Identity] = {}
    first_line: dict[str, int] = {}
    problems: list[str] = []
    for n, raw in enumerate(text.splitlines(), 1):
        if raw.strip().startswith("#"):
            continue
        for entry in raw.split(","):
            entry = entry.strip()
            if not entry:
                continue
            parts = [p.strip() for p in entry.split(":")]
            if len(parts) not in (2, 3):
                problems.append(f"line {n}: not user:sha256hex[:team] ({len(parts)} fields)")
                continue
            user, digest, team = parts[0], parts[1].lower(), parts[2] if len(parts) == 3 else ""
            if (why := _problem(user, digest, team)) is not None:
                problems.append(f"line {n}: {why}")
                continue
            ident = Identity(user, team or user)
            if out.get(digest, ident) != ident:
                problems.append(f"line {n}: the same hash as line {first_line[digest]}, another user or team")
                continue
            out[digest] = ident
            first_line.setdefault(digest, n)
    if problems:
        more = len(problems) - MAX_PROBLEMS_SHOWN
        shown = problems[:MAX_PROBLEMS_SHOWN] + ([f"... and {more} more"] if more > 0 else [])
        raise TokensFileError(f"{source}: {len(problems)} bad line(s):\n  " + "\n  ".join(shown))
    return out


def read_tokens_file(file: Path) -> dict[str, Identity]:
    """The tokens of `file`, bounded in size and checked line by line (TokensFileError, never a traceback)."""
    try:
        with open(file, "rb") as f:
            data = f.read(MAX_TOKENS_FILE_BYTES + 1)
    except OSError as e:
        raise TokensFileError(f"{file}: cannot read it ({e.strerror or type(e).__name__})") from None
    if len(data) > MAX_TOKENS_FILE_BYTES:
        raise TokensFileError(f"{file}: larger than {MAX_TOKENS_FILE_BYTES >> 20} MiB: not a tokens file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TokensFileError(f"{file}: not UTF-8 text (byte {e.start})") from None
    return parse_entries(text, str(file))


FileSignature = tuple[int, int, int, int]   # (device, inode, size, mtime in ns): what a poll compares


def file_signature(file: Path) -> FileSignature | None:
    """Changes when the file is rewritten, replaced (`token revoke`, a Kubernetes Secret's symlink swap) or
    appended to; None while it is missing."""
    try:
        st = os.stat(file)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True, slots=True)
class Reloaded:
    """What a reload changed: how many tokens there are now, and the hashes no longer valid."""
    tokens: int
    added: int
    removed: frozenset[str]


class TokenStore:
    """`enabled` is False when no tokens are configured: the server is open (meant for loopback only).

    The file's tokens can be replaced while the server runs (`reload`): inline `auth_tokens` stay, and
    `team_of` is updated in place (the tenancy holds it)."""

    def __init__(self, file: Path | None = None, inline: str = ""):
        self.file = file
        self.enabled = file is not None or bool(inline)
        self._inline = parse_entries(inline, "auth_tokens")
        self.by_hash: dict[str, Identity] = {}
        self.team_of: dict[str, str] = {}
        self.seen: FileSignature | None = file_signature(file) if file is not None else None
        self._install(read_tokens_file(file) if file is not None else {})

    def _install(self, from_file: dict[str, Identity]) -> None:
        self.by_hash = {**from_file, **self._inline}
        self.team_of.clear()
        self.team_of.update({i.user: i.team for i in self.by_hash.values()})

    @property
    def users(self) -> frozenset[str]:
        return frozenset(self.team_of)

    def knows(self, digest: str | None) -> bool:
        return digest is not None and digest in self.by_hash

    def read(self) -> dict[str, Identity]:
        """The file's tokens now (TokensFileError if it does not parse, is gone, or would lock everyone out:
        a file of no tokens replacing some is refused — stop the server to refuse everybody)."""
        assert self.file is not None
        tokens = read_tokens_file(self.file)
        if not tokens and self.by_hash and not self._inline:
            raise TokensFileError(f"{self.file}: no tokens in it (it would lock every user out)")
        return tokens

    def install(self, from_file: dict[str, Identity]) -> Reloaded:
        """Make `from_file` (from `read`) the file's tokens; returns what changed."""
        before = set(self.by_hash)
        self._install(from_file)
        return Reloaded(len(self.by_hash), len(set(self.by_hash) - before),
                        frozenset(before - set(self.by_hash)))

    def identify(self, token: str | None) -> tuple[Identity | None, str | None]:
        """(identity, token hash) of a presented token; (None, hash) for an unknown one."""
        if not token:
            return None, None
        digest = hash_token(token)
        return self.by_hash.get(digest), digest

    def user_for(self, token: str | None) -> str | None:
        ident, _ = self.identify(token)
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
