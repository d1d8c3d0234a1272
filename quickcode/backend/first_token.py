"""A network-facing server's first API token, made at its first start when the operator configured none.

With `auth_bootstrap_dir` set (the container images set it to a volume) and neither `auth_tokens_file`
nor `auth_tokens` given, a server bound beyond loopback neither refuses to start (a restart loop, the
reason in one log line) nor starts open: it issues one token for the user `owner` into `<dir>/tokens`
(hashes only, the file every later start reads), writes the token itself to `<dir>/initial-token` (0600,
for the operator to read once and delete) and says so in the log, with the reason. The token never goes
to the log, which is collected and kept elsewhere.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from quickcode.backend.auth import hash_token, new_token
from quickcode.backend.settings import Settings
from quickcode.backend.tenancy import is_loopback

log = logging.getLogger("quickcode.auth")

USER = "owner"
TOKENS = "tokens"
INITIAL = "initial-token"


def _write_private(path: Path, text: str) -> None:
    """Write `path` whole or not at all: created 0600 beside it, then renamed over it."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def needed(settings: Settings) -> bool:
    """True when this start would otherwise refuse to bind: no tokens, not loopback, not allowed open."""
    tokens_given = settings.auth_tokens_file is not None or bool(settings.auth_tokens)
    return (settings.auth_bootstrap_dir is not None and not tokens_given and not settings.allow_open
            and not is_loopback(settings.host))


def ensure(settings: Settings) -> Settings:
    """The settings this start serves with: unchanged, or with `auth_tokens_file` = the generated file."""
    if not needed(settings):
        return settings
    folder = Path(settings.auth_bootstrap_dir)
    tokens = folder / TOKENS
    if tokens.is_file():
        log.info("API tokens: %s (made at the first start; add a user: quickcode token issue --user NAME "
                 "--file %s, then restart)", tokens, tokens)
    else:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            token = new_token()
            _write_private(folder / INITIAL, token + "\n")   # first: a crash here leaves no tokens file
            _write_private(tokens, f"# made at the first start of this server\n{USER}:{hash_token(token)}\n")
        except OSError as e:
            raise SystemExit(f"quickcode serve: no API tokens are configured and the first one cannot be "
                             f"made in auth_bootstrap_dir {folder}: {e}") from None
        log.warning(
            "no API tokens are configured (auth_tokens_file, auth_tokens) and this server listens on %s, "
            "beyond loopback: open, anyone who reaches the port would use the model and every per-user limit "
            "would be void. So this first start made one token, for the user %r: its hash is in %s, which "
            "every later start reads. Read the token once (then delete that file):  "
            "docker exec CONTAINER cat %s  (compose: docker compose exec backend cat %s). "
            "Your own tokens instead: mount a file of "
            "`quickcode token issue` and set QUICKCODE_AUTH_TOKENS_FILE (or QUICKCODE_AUTH_TOKENS).",
            settings.host, USER, tokens, folder / INITIAL, folder / INITIAL)
    return settings.model_copy(update={"auth_tokens_file": tokens})
