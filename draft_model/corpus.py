"""Code files → a deduplicated, licence-clean corpus split into train and held-out by whole modules.

Sources are named on the command line: `stdlib` (this interpreter's standard library, PSF-2.0) or a folder
whose licence is read from its LICENSE/COPYING file. A source whose licence is not on the permissive list is
refused (and counted in the manifest), never silently mixed in.

Invariant: a module (top-level package or single-file module of a source) lies wholly in train or wholly in
held-out, decided by a stable hash of its id, so held-out figures never see a sibling file of training text.
"""
from __future__ import annotations

import hashlib
import json
import re
import sysconfig
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm import tqdm

PERMISSIVE = {"PSF-2.0", "MIT", "BSD", "Apache-2.0", "ISC"}
_LICENCE_MARKERS = [  # (text found in a LICENSE file, SPDX-ish id)
    ("PYTHON SOFTWARE FOUNDATION LICENSE", "PSF-2.0"),
    ("Apache License", "Apache-2.0"),
    ("Permission is hereby granted, free of charge", "MIT"),
    ("Redistribution and use in source and binary forms", "BSD"),
    ("Permission to use, copy, modify, and/or distribute", "ISC"),
    ("GNU GENERAL PUBLIC LICENSE", "GPL"),
    ("GNU LESSER GENERAL PUBLIC LICENSE", "LGPL"),
]
# Not code a developer writes: tests, generated tables, vendored copies, data.
_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__",
                     "encodings", "pydoc_data", "lib2to3", "turtledemo", "__phello__", "ensurepip", "_vendor", "vendor", "testing", "benchmarks"}
MAX_FILE_BYTES = 150_000
MAX_MEAN_LINE_CHARS = 90


@dataclass(frozen=True)
class Document:
    module: str  # "<source>:<top-level module>", the unit of the train/held-out split
    path: str    # relative to its source
    text: str


@dataclass
class CorpusStats:
    files_seen: int = 0
    kept: int = 0
    duplicates: int = 0
    too_large_or_generated: int = 0
    not_utf8: int = 0
    refused_licence: dict[str, str] = field(default_factory=dict)
    train_modules: list[str] = field(default_factory=list)
    heldout_modules: list[str] = field(default_factory=list)
    train_chars: int = 0
    heldout_chars: int = 0


def detect_licence(folder: Path) -> str:
    for parent in [folder, *folder.parents][:3]:
        for name in ("LICENSE", "LICENSE.txt", "LICENSE.md", "COPYING", "LICENCE"):
            f = parent / name
            if f.is_file():
                head = f.read_text(errors="replace")[:4000]
                for marker, spdx in _LICENCE_MARKERS:
                    if marker.lower() in head.lower():
                        return spdx
                return "unknown"
    return "unknown"


def is_heldout(module: str, fraction: float) -> bool:
    """Stable across machines and runs: the first 8 hex digits of sha1(module) as a fraction of 2**32."""
    h = int(hashlib.sha1(module.encode()).hexdigest()[:8], 16)
    return h / 2**32 < fraction


def _code_files(root: Path, candidates) -> list[Path]:
    return sorted(p for p in candidates
                  if p.suffix == ".py" and not (_SKIP_DIRS & set(p.relative_to(root).parts[:-1])))


def metadata_licence(dist) -> str:
    """SPDX-ish licence of an installed distribution from its metadata (expression, field, classifiers)."""
    md = dist.metadata
    fields = [md.get("License-Expression") or "", md.get("License") or "",
              *[c for c in md.get_all("Classifier") or [] if c.startswith("License ::")]]
    text = " ".join(fields).lower()
    words = set(re.split(r"[^a-z0-9]+", text))
    for needle, spdx in (("gpl", "GPL"), ("lgpl", "LGPL"), ("mpl", "MPL"), ("mozilla", "MPL"),
                         ("apache", "Apache-2.0"), ("mit", "MIT"), ("bsd", "BSD"), ("isc", "ISC"),
                         ("python software foundation", "PSF-2.0"), ("psf", "PSF-2.0")):
        if needle in words or (" " in needle and needle in text):
            return spdx
    return "unknown"


def _source_files(source: str) -> tuple[str, Path, str, list[Path]]:
    """(name, root, licence, files) of a source: `stdlib`, `site:<distribution>` or a folder."""
    if source == "stdlib":
        root = Path(sysconfig.get_paths()["stdlib"])
        return "stdlib", root, "PSF-2.0", _code_files(root, root.rglob("*.py"))
    if source.startswith("site:"):
        from importlib.metadata import distribution

        dist = distribution(source[5:])
        root = Path(dist.locate_file("")).resolve()
        files = [Path(dist.locate_file(f)).resolve() for f in dist.files or [] if str(f).endswith(".py")]
        return dist.metadata["Name"].lower(), root, metadata_licence(dist), _code_files(root, files)
    root = Path(source).resolve()
    return root.name, root, detect_licence(root), _code_files(root, root.rglob("*.py"))


def module_of(name: str, rel: Path) -> str:
    """The unit of the split: a stdlib top-level module, or a distribution's package/submodule."""
    depth = 1 if name == "stdlib" or len(rel.parts) < 3 else 2
    return f"{name}:{'/'.join(rel.parts[:depth]).removesuffix('.py')}"


def _normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").split("\n")).strip("\n") + "\n"


def collect(sources: list[str], heldout_fraction: float) -> tuple[list[Document], list[Document], CorpusStats]:
    stats = CorpusStats()
    seen: set[str] = set()
    train: list[Document] = []
    heldout: list[Document] = []
    for source in sources:
        name, root, licence, files = _source_files(source)
        if licence not in PERMISSIVE:
            stats.refused_licence[name] = licence
            continue
        for path in tqdm(files, desc=f"corpus {name}", unit="file", leave=False):
            stats.files_seen += 1
            raw = path.read_bytes()
            try:
                text = _normalise(raw.decode("utf-8"))
            except UnicodeDecodeError:
                stats.not_utf8 += 1
                continue
            lines = text.count("\n") or 1
            if len(raw) > MAX_FILE_BYTES or len(text) / lines > MAX_MEAN_LINE_CHARS:
                stats.too_large_or_generated += 1
                continue
            digest = hashlib.sha1(text.encode()).hexdigest()
            if digest in seen or len(text.strip()) < 64:
                stats.duplicates += 1
                continue
            seen.add(digest)
            rel = path.relative_to(root)
            module = module_of(name, rel)
            doc = Document(module, str(rel), text)
            (heldout if is_heldout(module, heldout_fraction) else train).append(doc)
            stats.kept += 1
    stats.train_modules = sorted({d.module for d in train})
    stats.heldout_modules = sorted({d.module for d in heldout})
    stats.train_chars = sum(len(d.text) for d in train)
    stats.heldout_chars = sum(len(d.text) for d in heldout)
    return train, heldout, stats


def write(data_dir: Path, train: list[Document], heldout: list[Document], stats: CorpusStats) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    for name, docs in (("train", train), ("heldout", heldout)):
        with open(data_dir / f"{name}_docs.jsonl", "w") as f:
            for d in docs:
                f.write(json.dumps(asdict(d)) + "\n")
    (data_dir / "manifest.json").write_text(json.dumps(asdict(stats), indent=1) + "\n")


def read_docs(data_dir: Path, split: str) -> list[Document]:
    with open(data_dir / f"{split}_docs.jsonl") as f:
        return [Document(**json.loads(line)) for line in f]
