"""PyPI source distributions pinned in a committed lock → verified, cached archives → their Python files.

The lock (`quickcode/draft_model/sources/pypi.tsv`: name, version, filename, sha256, size) is what makes the
corpus reproducible: an archive is downloaded once into the cache (`runs/cache/pypi/`), by the file name
PyPI's simple index gives for it, and refused unless its sha256 is the locked one. `python -m
quickcode.draft_model.pypi lock` writes the lock from a list of names (the version pinned where given, else
the newest release that has an sdist; with `--releases N`, the newest N stable releases that have one, oldest
first: consecutive versions of one package, for edit pairs).

The licence is read from the sdist itself: the declared metadata of PKG-INFO (License-Expression, License,
classifiers) and, when that declares nothing recognisable, the LICENSE/COPYING text.
"""
from __future__ import annotations

import argparse
import email.parser
import hashlib
import io
import json
import re
import sys
import tarfile
import time
import urllib.error
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import Version

SIMPLE_INDEX = "https://pypi.org/simple"
LOCK_COLUMNS = ("name", "version", "filename", "sha256", "size")
MAX_SDIST_BYTES = 60_000_000      # larger sdists are data or C++ bundles, not Python worth the download
_LICENCE_FILE = re.compile(r"^(licen[cs]e|copying|copyright)([._-].*)?$", re.I)


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    filename: str
    sha256: str
    size: int


# ── the lock ──────────────────────────────────────────────────────────────────────────────────────────────────
def read_lock(path: Path) -> list[Pin]:
    pins = []
    for line in Path(path).read_text().splitlines():
        if not line.strip() or line.startswith("#") or line.startswith("name\t"):
            continue
        name, version, filename, sha256, size = line.split("\t")[:5]
        pins.append(Pin(name, version, filename, sha256, int(size)))
    return pins


def write_lock(path: Path, pins: list[Pin], header: str) -> None:
    rows = ["\t".join(LOCK_COLUMNS)] + ["\t".join(str(getattr(p, c)) for c in LOCK_COLUMNS) for p in pins]
    Path(path).write_text("".join(f"# {h}\n" for h in header.splitlines()) + "\n".join(rows) + "\n")


def _get(url: str, accept: str | None = None, timeout_s: float = 120, tries: int = 4) -> bytes:
    for attempt in range(tries):
        try:
            req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
            with urllib.request.urlopen(req, timeout=timeout_s) as r:
                return r.read()
        except urllib.error.HTTPError as e:
            if e.code == 404 or attempt == tries - 1:
                raise
        except OSError:
            if attempt == tries - 1:
                raise
        time.sleep(2 ** attempt)
    raise AssertionError("unreachable")


def _index_files(name: str) -> list[dict]:
    body = _get(f"{SIMPLE_INDEX}/{canonicalize_name(name)}/", accept="application/vnd.pypi.simple.v1+json")
    return json.loads(body)["files"]


def _sdist_version(filename: str, name: str) -> Version | None:
    """The version of `filename` if it is an sdist of `name` (its name normalised as PyPI does), else None."""
    try:
        sdist_name, version = parse_sdist_filename(filename)
    except InvalidSdistFilename:
        return None
    return version if sdist_name == canonicalize_name(name) else None


def resolve(name: str, version: str | None) -> Pin | str:
    """The sdist of `name==version` (or of its newest release with one) in PyPI's simple index; else why not."""
    try:
        files = _index_files(name)
    except urllib.error.HTTPError as e:
        return f"index {e.code}"
    sdists = [(v, str(v), f) for f in files
              if (v := _sdist_version(f["filename"], name)) is not None and not f.get("yanked")]
    if not sdists:
        return "no sdist"
    match = []
    if version:
        match = [s for s in sdists if s[0] == Version(version)]
    if version and match:
        _, v, f = match[0]
    else:  # no pinned version, or the pinned release has no sdist: the newest stable release with one
        stable = [s for s in sdists if not s[0].is_prerelease] or sdists
        _, v, f = max(stable, key=lambda s: s[0])
    if f.get("size", 0) > MAX_SDIST_BYTES:
        return "sdist too large"
    return Pin(canonicalize_name(name), v, f["filename"], f["hashes"]["sha256"], int(f.get("size", 0)))


def resolve_releases(name: str, n: int) -> list[Pin] | str:
    """The sdists of the newest `n` stable releases of `name` that have one (oldest first); else why not."""
    try:
        files = _index_files(name)
    except urllib.error.HTTPError as e:
        return f"index {e.code}"
    by_version: dict[Version, dict] = {}
    for f in files:
        v = _sdist_version(f["filename"], name)
        if v is not None and not v.is_prerelease and not f.get("yanked") and v not in by_version:
            by_version[v] = f
    newest = sorted(by_version)[-n:]
    if len(newest) < n:
        return f"{len(newest)} releases with an sdist"
    if any(by_version[v].get("size", 0) > MAX_SDIST_BYTES for v in newest):
        return "sdist too large"
    return [Pin(canonicalize_name(name), str(v), by_version[v]["filename"], by_version[v]["hashes"]["sha256"],
                int(by_version[v].get("size", 0))) for v in newest]


# ── archives ──────────────────────────────────────────────────────────────────────────────────────────────────
def fetch(pin: Pin, cache_dir: Path) -> Path:
    """The archive of `pin` in `cache_dir`, downloaded if missing; a sha256 other than the lock's is refused."""
    out = Path(cache_dir) / pin.filename
    if out.exists() and hashlib.sha256(out.read_bytes()).hexdigest() == pin.sha256:
        return out
    url = next(f["url"] for f in _index_files(pin.name) if f["filename"] == pin.filename)
    body = _get(url)
    digest = hashlib.sha256(body).hexdigest()
    if digest != pin.sha256:
        raise ValueError(f"{pin.filename}: sha256 {digest} is not the locked {pin.sha256}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    tmp.write_bytes(body)
    tmp.replace(out)
    return out


def fetch_all(pins: list[Pin], cache_dir: Path, workers: int = 4) -> dict[str, Path | str]:
    """{filename: archive path or the error} for every pin; a few downloads at a time (be polite)."""
    from tqdm import tqdm

    def one(pin: Pin) -> tuple[str, Path | str]:
        try:
            return pin.filename, fetch(pin, cache_dir)
        except Exception as e:  # noqa: BLE001 — a failed download is counted, the rest go on
            return pin.filename, f"{type(e).__name__}: {e}"

    with ThreadPoolExecutor(workers) as pool:
        return dict(tqdm(pool.map(one, pins), total=len(pins), desc="pypi sdists", unit="sdist", leave=False))


@dataclass
class Sdist:
    pkg_info: str                      # the top-level PKG-INFO ('' if none)
    licence_texts: list[str]           # LICENSE / COPYING files at the top or one folder down
    files: list[tuple[str, bytes]]     # (path below the sdist's top folder, bytes) of every .py file


def read_sdist(path: Path, max_file_bytes: int) -> Sdist:
    """The parts of a .tar.gz or .zip sdist the corpus needs (read in place: nothing is extracted)."""
    pkg_info, licences, files = "", [], []

    def take(rel: PurePosixPath, size: int, read) -> None:
        nonlocal pkg_info
        if len(rel.parts) == 1 and rel.name == "PKG-INFO":
            pkg_info = read().decode("utf-8", "replace")
        elif len(rel.parts) <= 2 and _LICENCE_FILE.match(rel.name) and size < 200_000:
            licences.append(read().decode("utf-8", "replace"))
        elif rel.suffix == ".py" and size <= max_file_bytes:
            files.append((str(rel), read()))

    if path.name.endswith(".zip"):
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                parts = PurePosixPath(info.filename).parts
                if not info.is_dir() and len(parts) > 1:
                    take(PurePosixPath(*parts[1:]), info.file_size, lambda i=info: z.read(i))
    else:
        with tarfile.open(path, "r:*") as t:
            for m in t:
                parts = PurePosixPath(m.name).parts
                if m.isfile() and len(parts) > 1:
                    take(PurePosixPath(*parts[1:]), m.size, lambda m=m: t.extractfile(m).read())
    return Sdist(pkg_info, licences, files)


# ── licences ──────────────────────────────────────────────────────────────────────────────────────────────────
PERMISSIVE = {"PSF-2.0", "MIT", "BSD", "Apache-2.0", "ISC", "Unlicense", "Zlib", "HPND", "0BSD", "CC0-1.0",
              "BSL-1.0", "MIT-0", "ZPL-2.1", "CNRI-Python", "TCL"}
# (pattern over lower-cased text, id): the first match wins, so the copyleft and proprietary ones come first
_DECLARED = [(re.compile(p), spdx) for p, spdx in (
    (r"\bagpl|affero", "AGPL"), (r"\blgpl|lesser general public|library general public", "LGPL"),
    (r"\bgpl|general public licen[cs]e", "GPL"), (r"\bmpl\b|mpl-|mozilla", "MPL"),
    (r"\beupl|european union public", "EUPL"), (r"\bepl\b|epl-|eclipse public", "EPL"),
    (r"\bcddl\b", "CDDL"), (r"\bsspl\b|server side public", "SSPL"), (r"business source", "BUSL"),
    (r"proprietary|commercial licen[cs]e", "proprietary"), (r"cc-by-nc|noncommercial", "CC-BY-NC"),
    (r"creative commons attribution", "CC-BY"), (r"\bartistic", "Artistic"),
    (r"\bapache", "Apache-2.0"), (r"\bmit-0\b", "MIT-0"), (r"\bmit\b|expat", "MIT"), (r"\b0bsd\b", "0BSD"),
    (r"\bbsd\b|bsd-|bsd licen", "BSD"), (r"\bisc\b|iscl", "ISC"),
    (r"python software foundation|\bpsf\b|psf-|\bpython-2\.0\b", "PSF-2.0"), (r"unlicense", "Unlicense"),
    (r"\bzlib\b|zlib/libpng", "Zlib"), (r"\bhpnd\b|historical permission notice", "HPND"),
    (r"\bcc0\b|cc0-", "CC0-1.0"), (r"boost software|\bbsl-1", "BSL-1.0"),
    (r"\bzpl\b|zpl-|zope public", "ZPL-2.1"), (r"\bcnri-python\b", "CNRI-Python"), (r"^tcl$", "TCL"),
    (r"public domain", "Unlicense"),
)]
# what a LICENSE file says, by a sentence of its text
_LICENCE_TEXT = [
    ("GNU AFFERO GENERAL PUBLIC LICENSE", "AGPL"), ("GNU LESSER GENERAL PUBLIC LICENSE", "LGPL"),
    ("GNU LIBRARY GENERAL PUBLIC LICENSE", "LGPL"), ("GNU GENERAL PUBLIC LICENSE", "GPL"),
    ("Mozilla Public License", "MPL"),
    ("PYTHON SOFTWARE FOUNDATION LICENSE", "PSF-2.0"), ("Apache License", "Apache-2.0"),
    ("Permission is hereby granted, free of charge", "MIT"),
    ("Redistribution and use in source and binary forms", "BSD"),
    ("Permission to use, copy, modify, and/or distribute", "ISC"),
    ("Permission to use, copy, modify, and distribute", "ISC"),
    ("This is free and unencumbered software released into the public domain", "Unlicense"),
    ("This software is provided 'as-is', without any express or implied", "Zlib"),
]


def _declared(text: str) -> str | None:
    """The licence a metadata field names. A long field is the licence's whole text: it is recognised by its
    sentences (a BSD text says "All rights reserved", an Apache text "commercial damages")."""
    low = text.lower().strip()
    if len(low) > 200:
        for marker, spdx in _LICENCE_TEXT:
            if marker.lower() in low:
                return spdx
        return None
    for pattern, spdx in _DECLARED:
        if pattern.search(low):
            return spdx
    return None


def expression_licence(expr: str) -> str:
    """An SPDX expression: permissive if one OR-alternative has only permissive parts (`MIT OR GPL-2.0` is)."""
    best = "unknown"
    for alt in re.split(r"\s+OR\s+", expr.replace("(", " ").replace(")", " ")):
        alt = re.sub(r"\s+WITH\s+\S+", "", alt)   # an exception only adds permissions
        parts = [p for p in re.split(r"\s+AND\s+", alt.strip()) if p]
        ids = [_declared(p) or "unknown" for p in parts]
        if ids and all(i in PERMISSIVE for i in ids):
            return ids[0]
        if best == "unknown" and ids:
            best = next((i for i in ids if i not in PERMISSIVE), ids[0])
    return best


def licence_of(pkg_info: str, licence_texts: list[str]) -> str:
    """SPDX-ish licence of an sdist: its License-Expression, else License + classifiers, else its LICENSE text.
    Any copyleft or proprietary word among the declared fields wins over a permissive one (refused)."""
    md = email.parser.Parser().parsestr(pkg_info, headersonly=False) if pkg_info else {}
    expr = (md.get("License-Expression") or "").strip() if md else ""
    if expr:
        return expression_licence(expr)
    fields = []
    if md:
        lic = (md.get("License") or "").strip()
        if lic and lic.upper() not in ("UNKNOWN", "NONE", ""):
            fields.append(lic)
        fields += [c for c in md.get_all("Classifier") or [] if c.startswith("License ::")
                   and c.strip() != "License :: OSI Approved"]
    found = [x for x in (_declared(f) for f in fields) if x]
    if found:
        refused = [x for x in found if x not in PERMISSIVE]
        return refused[0] if refused else found[0]
    for text in licence_texts:
        head = text[:6000].lower()
        for marker, spdx in _LICENCE_TEXT:
            if marker.lower() in head:
                return spdx
    return "unknown"


# ── `python -m quickcode.draft_model.pypi lock` ─────────────────────────────────────────────────────────────────────────
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m quickcode.draft_model.pypi", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    lk = sub.add_parser("lock", help="names (one 'name' or 'name==version' a line) → a lock of their sdists")
    lk.add_argument("names", type=Path)
    lk.add_argument("--out", type=Path, required=True)
    lk.add_argument("--workers", type=int, default=4)
    lk.add_argument("--releases", type=int, default=0,
                    help="lock the newest N stable releases of each name (consecutive versions) instead of one")
    args = ap.parse_args(argv)
    wanted = []
    for line in args.names.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            wanted.append((name.strip(), version.strip() or None))
    one = (lambda nv: resolve_releases(nv[0], args.releases)) if args.releases else (lambda nv: resolve(*nv))
    with ThreadPoolExecutor(args.workers) as pool:
        got = list(pool.map(one, wanted))
    pins, skipped = [], {}
    for (name, _), r in zip(wanted, got):
        if isinstance(r, str):
            skipped[name] = r
        else:
            pins += r if isinstance(r, list) else [r]
    write_lock(args.out, pins, f"PyPI sdists of {args.names.name}: {len(pins)} locked, {len(skipped)} skipped\n"
               f"skipped: {json.dumps(skipped, sort_keys=True)}")
    print(json.dumps({"locked": len(pins), "skipped": len(skipped)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
