"""`quickcode serve`, `quickcode token` and `quickcode probe`: the operator's commands."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction, only: str | None = None) -> None:
    if only in (None, "serve"):
        _register_serve(sub)
    if only in (None, "token"):
        _register_token(sub)
    if only in (None, "probe"):
        from quickcode.backend import speed_probe

        p = sub.add_parser("probe", help="time the default profile on typing-size requests on this machine",
                           description=" ".join(speed_probe.__doc__.split("\n\n")[0].split()))
        speed_probe.add_arguments(p)
        p.set_defaults(func=speed_probe.run)


def _register_serve(sub: argparse._SubParsersAction) -> None:
    from quickcode.backend.settings_doc import help_text

    p = sub.add_parser("serve", help="run the backend (FastAPI + vLLM) on the embedded default or a config",
                       epilog=help_text(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default=None, help="the setting host")
    p.add_argument("--port", type=int, default=None, help="the setting port")
    p.add_argument("--config", default=None,
                   help="a TOML file of settings (quickcode/backend/settings.py), or a shipped config's name "
                        "(gpu-13b-int8)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override any setting, e.g. --set spec_method=off --set scheduler=fifo")
    p.add_argument("--settings-markdown", action="store_true",
                   help="print the settings reference as markdown (docs/settings.md) and exit")
    p.set_defaults(func=_serve)


def _register_token(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("token", help="issue or revoke per-user API tokens (stored hashed)")
    tsub = t.add_subparsers(dest="token_cmd", required=True)
    i = tsub.add_parser("issue", help="print a new token for USER (shown once) and store its hash")
    i.add_argument("--user", required=True)
    i.add_argument("--team", default="",
                   help="the user's team: their prefix-cache tenant when cache_isolation=team")
    i.add_argument("--file", type=Path, required=True,
                   help="the tokens file the server loads (auth_tokens_file)")
    i.set_defaults(func=_issue)
    r = tsub.add_parser("revoke", help="remove every token of USER")
    r.add_argument("--user", required=True)
    r.add_argument("--file", type=Path, required=True)
    r.set_defaults(func=_revoke)
    m = tsub.add_parser("scrape",
                        help="print a new scrape-only token for Prometheus and the hash to configure")
    m.set_defaults(func=_scrape)
    a = tsub.add_parser("admin", help="print a new admin token (for /debug/*) and the hash to configure")
    a.set_defaults(func=_admin)


def settings_from_args(args: argparse.Namespace):
    import os

    from quickcode.backend.settings import Settings

    from quickcode.backend.assets import config_path

    if args.config:
        try:
            os.environ["QUICKCODE_CONFIG"] = str(config_path(args.config))
        except FileNotFoundError as e:
            raise SystemExit(f"quickcode serve: {e}") from None
    overrides = {}
    for kv in args.set:
        key, sep, value = kv.partition("=")
        if not sep:
            raise SystemExit(f"--set wants KEY=VALUE, got {kv!r}")
        overrides[key.strip()] = value
    if args.host:
        overrides["host"] = args.host
    if args.port:
        overrides["port"] = args.port
    import tomllib

    from pydantic import ValidationError

    try:
        return Settings(**overrides)
    except ValidationError as e:   # an operator's typo: which setting, what it takes, not a traceback
        raise SystemExit("quickcode serve: bad settings (--set, QUICKCODE_*, --config; "
                         "quickcode/backend/settings.py)\n"
                         + "\n".join(_setting_error(err) for err in e.errors())) from None
    except tomllib.TOMLDecodeError as e:
        config = os.environ.get("QUICKCODE_CONFIG")
        raise SystemExit(f"quickcode serve: the config {config} is not TOML: {e}") from None


def _setting_error(err: dict) -> str:
    key = ".".join(str(x) for x in err.get("loc", ())) or "?"
    if err.get("type") == "extra_forbidden":
        return f"  {key}: no such setting"
    return f"  {key}: {err.get('msg', 'invalid')} (got {err.get('input')!r:.80})"


def _serve(args: argparse.Namespace) -> int:
    if args.settings_markdown:
        from quickcode.backend.settings_doc import markdown

        print(markdown(), end="")
        return 0
    from quickcode.backend.serve import run

    run(settings_from_args(args))
    return 0


def _issue(args: argparse.Namespace) -> int:
    from quickcode.backend.auth import issue

    try:
        token = issue(args.file, args.user, args.team)
    except ValueError as e:
        raise SystemExit(f"quickcode token issue: {e}")
    print(token)
    print(f"stored the hash for user {args.user!r} in {args.file}; the token is not kept anywhere",
          file=sys.stderr)
    return 0


def _new_token(setting: str, then: str) -> int:
    """Print a new token on stdout and, on stderr, the setting that takes its hash (the token is kept
    nowhere)."""
    from quickcode.backend.auth import hash_token, new_token

    token = new_token()
    print(token)
    print(f"set {setting} = \"{hash_token(token)}\"{then}", file=sys.stderr)
    return 0


def _scrape(args: argparse.Namespace) -> int:
    return _new_token("metrics_token_sha256", " (it opens /metrics only); give Prometheus the token")


def _admin(args: argparse.Namespace) -> int:
    return _new_token("admin_token_sha256", " and debug_endpoints = true (it opens /debug/* only)")


def _revoke(args: argparse.Namespace) -> int:
    from quickcode.backend.auth import revoke

    n = revoke(args.file, args.user)
    print(f"revoked {n} token(s) of {args.user!r}", file=sys.stderr)
    return 0 if n else 1
