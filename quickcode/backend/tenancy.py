"""Who may share what: a user's prefix-cache tenant, and whether this server may listen where it is told to.

vLLM's prefix cache is shared by every request on a replica unless a request carries a `cache_salt`: then its
blocks hash differently and only requests with the same salt can hit them. A hit shows in a reply
(`done.timing.cached_tokens`, and in a shorter time to first token), so a user who could hit another user's
blocks could learn that user's code a guess at a time. Each request is therefore salted with its tenant:

  user    every user is a tenant (the default when tokens are on; on an open server each session is a user)
  team    the team of the user's token record (`user:hash:team` in the tokens file; no team: the user alone)
  shared  no salt: everyone on the replica shares (and can probe) one cache — an operator's explicit choice

The default `auto` is `user`, except on an open server bound to loopback (one developer's own machine), which
shares: there every session is the same person.
"""
from __future__ import annotations

import hashlib
import ipaddress
import logging
from typing import Literal

log = logging.getLogger("quickcode.tenancy")

Isolation = Literal["user", "team", "shared"]


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and `localhost`; everything else (0.0.0.0, ::, a LAN address, a name) is the
    network."""
    if host.strip().lower() in ("localhost", "localhost.", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def resolve_isolation(setting: str, tokens_enabled: bool, host: str) -> Isolation:
    if setting != "auto":
        return setting  # type: ignore[return-value]
    return "shared" if not tokens_enabled and is_loopback(host) else "user"


class BindRefused(SystemExit):
    """Raised (exit status 1, the message on stderr) when an open server would listen beyond loopback
    without the operator's consent."""


def check_bind(host: str, tokens_enabled: bool, allow_open: bool) -> None:
    """An open port is a decision, not a default: without tokens every connection is a new anonymous user
    (per-user limits and cache isolation then protect nobody from anybody), so a non-loopback bind needs
    tokens or `allow_open = true`, which is logged loudly."""
    if tokens_enabled or is_loopback(host):
        return
    if not allow_open:
        raise BindRefused(
            f"quickcode: refusing to listen on {host!r} without API tokens: anyone who can reach this port "
            f"could use the model and every per-user limit would be void.\n"
            f"  Issue tokens:  quickcode token issue --user NAME --file tokens  and serve with "
            f"--set auth_tokens_file=tokens (and TLS: ssl_certfile/ssl_keyfile), see docs/operators.md;\n"
            f"  or bind to loopback:  --host 127.0.0.1;\n"
            f"  or, if this network is yours alone, say so:  --set allow_open=true")
    log.warning("!!! OPEN SERVER: listening on %s WITHOUT API tokens (allow_open = true): anyone who can "
                "reach this port can use it, and each connection is a new anonymous user !!!", host)


class Tenancy:
    """Maps a user to the `cache_salt` of their tenant (None: no salt, the shared cache)."""

    def __init__(self, isolation: Isolation, team_of: dict[str, str]):
        self.isolation = isolation
        self.team_of = team_of

    def tenant(self, user: str) -> str | None:
        if self.isolation == "shared":
            return None
        if self.isolation == "team":
            return "team:" + self.team_of.get(user, "user:" + user)
        return "user:" + user

    def cache_salt(self, user: str) -> str | None:
        """A fixed-length salt, so that no user or team name reaches the engine's hash input as such."""
        tenant = self.tenant(user)
        return None if tenant is None else hashlib.sha256(tenant.encode()).hexdigest()
