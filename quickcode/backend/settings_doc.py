"""The settings reference, made from the `Settings` model itself: `quickcode serve --help`, docs/settings.md.

Each field gives its name, type (or allowed values, and bounds), default and docstring; the unit comes from
the name's suffix (`_ms`, `_s`, `_bytes`, …), the section from the `# ── name` comment above it in the class.
Regenerate the doc with `quickcode serve --settings-markdown > docs/settings.md` (a test fails on drift).
"""
from __future__ import annotations

import inspect
import re
import textwrap
import types
import typing
from dataclasses import dataclass
from pathlib import Path

import annotated_types
from pydantic.fields import FieldInfo

from quickcode.backend import profiles
from quickcode.backend.assets import CHECKOUT
from quickcode.backend.settings import MODELS, Settings

ENV_PREFIX = Settings.model_config["env_prefix"]
_UNITS = (("_per_s", "per second"), ("_ms", "milliseconds"), ("_s", "seconds"), ("_bytes", "bytes"),
          ("_gib", "GiB"), ("_tokens", "tokens"), ("_chars", "characters"), ("_sha256", "hex SHA-256"))
_SECTION = re.compile(r"^\s+# ── (.+?)\s*$")
_FIELD = re.compile(r"^\s+(\w+)\s*:")
_BOUNDS = {annotated_types.Ge: ("≥", "ge"), annotated_types.Gt: (">", "gt"), annotated_types.Le: ("≤", "le"),
           annotated_types.Lt: ("<", "lt")}
HELP_WIDTH = 100
UNSET, COMPUTED = "unset", "computed at start"
_NOT_VALUES = (UNSET, COMPUTED)   # defaults said in words, not written as a value


@dataclass(frozen=True, slots=True)
class SettingDoc:
    name: str
    section: str
    kind: str          # the type, or the allowed values, with bounds
    default: str       # as it would be written in a TOML config
    unit: str          # from the name's suffix; "" when the name carries none
    description: str   # the field's docstring on one line
    profiles: str      # what each profile gives it when left unset: `default "int8", light "bf16"`

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()


def sections() -> dict[str, str]:
    """field → the `# ── name` section comment above it in the class body ("settings" without a source)."""
    try:
        lines = inspect.getsource(Settings).splitlines()
    except (OSError, TypeError):
        return {}
    out, section = {}, "settings"
    for line in lines:
        if m := _SECTION.match(line):
            section = m.group(1)
        elif (m := _FIELD.match(line)) and m.group(1) in Settings.model_fields:
            out.setdefault(m.group(1), section)
    return out


def unit_of(name: str) -> str:
    return next((unit for suffix, unit in _UNITS if name.endswith(suffix)), "")


def kind_of(annotation, metadata: list) -> str:
    """`bf16 | int8`, `int ≥ 1, ≤ 16`, `path or unset`, `true | false`, `list of str`."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return " | ".join(str(a) for a in args)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return f"{kind_of(rest[0], metadata) if len(rest) == 1 else 'value'} or unset"
    if annotation is bool:
        return "true | false"
    if typing.get_origin(annotation) is list:
        return f"list of {kind_of(args[0], []) if args else 'values'}"
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return "path"
    name = getattr(annotation, "__name__", str(annotation))
    bounds = [f"{sign} {getattr(m, attr)}" for m in metadata if type(m) in _BOUNDS
              for sign, attr in [_BOUNDS[type(m)]]]
    return name + (" " + ", ".join(bounds) if bounds else "")


def _path(p: Path) -> str:
    """A default path as a reader of the docs sees it: relative to the checkout (or the shipped models)."""
    for root, shown in ((MODELS, Path("models")), (CHECKOUT, Path("."))):
        try:
            return str(shown / p.relative_to(root))
        except ValueError:
            pass
    try:
        return str(Path("~") / p.relative_to(Path.home()))
    except (ValueError, RuntimeError):
        return str(p)


def default_of(field: FieldInfo) -> str:
    """The default as written in TOML (`"text"`, `true`, `1048576`); "unset" for None; "computed at start"
    for a factory."""
    return COMPUTED if field.default_factory is not None else value_of(field.default)


def value_of(value: object) -> str:
    if value is None:
        return UNSET
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Path):
        return f'"{_path(value)}"'
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, int) and value >= 1 << 20 and value % (1 << 20) == 0:
        return f"{value} ({value >> 20} MiB)"
    return repr(value)


def by_profile(name: str) -> str:
    """What each embedded profile gives the setting when it is left unset ("" if no profile sets it)."""
    given = {p: profiles.profile_settings(p) for p in profiles.PROFILE_NAMES}
    return ", ".join(f"{p} {value_of(v[name])}" for p, v in given.items() if name in v)


def settings_docs() -> list[SettingDoc]:
    """Every field of `Settings`, in the order of the class."""
    where = sections()
    return [SettingDoc(name, where.get(name, "settings"), kind_of(f.annotation, f.metadata), default_of(f),
                       unit_of(name), " ".join((f.description or "").split()), by_profile(name))
            for name, f in Settings.model_fields.items()]


def _by_section(docs: list[SettingDoc]) -> dict[str, list[SettingDoc]]:
    out: dict[str, list[SettingDoc]] = {}
    for d in docs:
        out.setdefault(d.section, []).append(d)
    return out


def help_text(width: int = HELP_WIDTH) -> str:
    """The settings part of `quickcode serve --help`: each setting, its default, type, unit, description."""
    lines = ["settings (--set NAME=VALUE, or the environment QUICKCODE_NAME, or NAME = VALUE in a --config",
             "TOML file; the same list with the environment names: docs/settings.md):"]
    for section, docs in _by_section(settings_docs()).items():
        lines += ["", f"  {section}"]
        for d in docs:
            kind = f"{d.kind}, {d.unit}" if d.unit else d.kind
            lines += textwrap.wrap(f"{d.name} = {d.default}  ({kind})", width, initial_indent=" " * 4,
                                   subsequent_indent=" " * 8, break_on_hyphens=False)
            for text in (d.description, f"left unset, the profile's: {d.profiles}" if d.profiles else ""):
                lines += textwrap.wrap(text, width, initial_indent=" " * 8, subsequent_indent=" " * 8,
                                       break_on_hyphens=False)
    return "\n".join(lines) + "\n"


def markdown(width: int = 118) -> str:
    """docs/settings.md: a section per `# ──` group, an entry per setting."""
    out = ["# Settings reference", "",
           "<!-- Generated from quickcode/backend/settings.py by quickcode/backend/settings_doc.py; do not",
           "     edit. Regenerate with",
           "     quickcode serve --settings-markdown > docs/settings.md",
           "     (tests/backend/test_settings_doc.py fails when this file and the code differ). -->", "",
           "Every setting of `quickcode serve`, in the order of `quickcode/backend/settings.py`. Set one",
           "with `--set NAME=VALUE`, the environment variable `QUICKCODE_NAME`, or `NAME = VALUE` in a TOML",
           "file given by `--config` (or `QUICKCODE_CONFIG`); the environment wins over the file (a list is",
           "JSON there: `QUICKCODE_ALLOWED_ORIGINS='[\"https://a.example\"]'`). Paths are relative to the",
           "checkout; `models/` is the checkout's models folder (or the installed package's copy). The",
           "model settings a bare `quickcode serve` leaves unset are filled in by its `profile`",
           "(quickcode/backend/profiles.py), unless a model is named: what each profile gives is said",
           "beside them.", ""]
    for section, docs in _by_section(settings_docs()).items():
        out += [f"## {section}", ""]
        for d in docs:
            unit = f", in {d.unit}" if d.unit else ""
            default = d.default if d.default in _NOT_VALUES else f"`{d.default}`"
            head = f"- **`{d.name}`** (`{d.env}`): {d.kind}{unit}; default {default}."
            out += textwrap.wrap(head, width, subsequent_indent="  ", break_on_hyphens=False)
            out += textwrap.wrap(d.description, width, initial_indent="  ", subsequent_indent="  ",
                                 break_on_hyphens=False)
            if d.profiles:
                out += textwrap.wrap(f"Left unset, the profile's: {d.profiles}.", width, initial_indent="  ",
                                     subsequent_indent="  ", break_on_hyphens=False)
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":   # as `quickcode serve --settings-markdown`
    print(markdown(), end="")
