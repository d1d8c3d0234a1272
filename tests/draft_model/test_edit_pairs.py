"""Edit sequences from two versions of small packages made here as sdists (no network: the archives are in the
cache under the lock's sha256): the changed blocks, their grouping into sequences of nearby edits, replaying a
record's edits, the licence refusal, HumanEval decontamination and the split by whole packages."""
from __future__ import annotations

import hashlib
import io
import json
import tarfile

from quickcode.draft_model import dedup
from quickcode.draft_model import edit_pairs as ep
from quickcode.draft_model.pypi import Pin

OLD = ("import os\n\n\ndef area(width, height):\n    total = width * height\n    return total\n\n\n"
       "def describe(width, height):\n    size = area(width, height)\n    return f'{size}'\n"
       + "".join(f"\n\ndef f{i}(x):\n    return x + {i}\n" for i in range(20))
       + "\n\ndef last(width):\n    return width\n")
# the first two blocks are nearby (a rename and its use); the third is 60 lines further down: its own
NEW = (OLD.replace("    total = width * height\n    return total\n", "    product = width * height\n"
                   "    return product\n")
       .replace("    size = area(width, height)\n", "    size = area(width, height=height)\n")
       .replace("def last(width):\n    return width\n", "def last(width, scale=1):\n    return width * scale\n"))


def sdist(folder, name: str, version: str, files: dict[str, str], licence: str = "MIT") -> Pin:
    """A .tar.gz sdist of `files` (below src/) with a PKG-INFO declaring `licence`, and its pin."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        members = {"PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nLicense: {licence}\n",
                   **{f"src/{p}": text for p, text in files.items()}}
        for path, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-{version}/{path}")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    filename = f"{name}-{version}.tar.gz"
    (folder / filename).write_bytes(buf.getvalue())
    return Pin(name, version, filename, hashlib.sha256(buf.getvalue()).hexdigest(), len(buf.getvalue()))


def test_nearby_blocks_make_one_sequence_and_a_far_one_is_left_alone():
    blocks = ep.hunks(ep.rejection(OLD.encode())[1], ep.rejection(NEW.encode())[1])
    assert len(blocks) == 3
    (run,) = ep.sequences(blocks, window_lines=8)
    assert [h.old for h in run] == ["    total = width * height\n    return total\n",
                                    "    size = area(width, height)\n"]
    assert len(ep.sequences(blocks, window_lines=200)[0]) == 3


def test_replaying_a_records_edits_gives_the_newer_versions_text(tmp_path):
    pins = [sdist(tmp_path, "geom", "1.0", {"geom/shapes.py": OLD}), sdist(tmp_path, "geom", "1.1",
                                                                              {"geom/shapes.py": NEW})]
    train, heldout, stats = ep.build(pins, tmp_path, heldout_fraction=0.0, humaneval=False)
    (rec,) = train
    assert heldout == [] and stats.version_pairs == 1 and stats.sequences == 1
    assert rec["package"] == "geom" and (rec["from_version"], rec["to_version"]) == ("1.0", "1.1")
    assert rec["path"] == "geom/shapes.py" and rec["from_sha256"] == pins[0].sha256
    old = ep.rejection(OLD.encode())[1]
    assert rec["excerpt_start_line"] == 0 and old.startswith(rec["text"])   # 80 lines on from the sequence
    assert len(rec["text"].splitlines()) == 10 + ep.CONTEXT_LINES      # the second edit ends at line 10
    after = ep.after_edits(rec)
    assert "product = width * height" in after and "area(width, height=height)" in after
    assert after == ep.rejection(NEW.encode())[1][:len(after)]     # the newer version, as far as it goes
    assert ep.after_edits(rec, 1).count("height=height") == 0


def test_a_copyleft_package_is_refused_and_counted(tmp_path):
    pins = [sdist(tmp_path, "gplgeom", v, {"gplgeom/shapes.py": t}, licence="GPL-3.0-or-later")
            for v, t in (("1.0", OLD), ("1.1", NEW))]
    train, heldout, stats = ep.build(pins, tmp_path, heldout_fraction=0.0, humaneval=False)
    assert train == heldout == [] and stats.refused_licence == {"gplgeom 1.0..1.1": "GPL"}


def test_a_training_record_sharing_a_humaneval_run_is_dropped(tmp_path):
    problem = dedup.humaneval_texts()[0]           # in the file's text before and after the edits
    old, new = (t.replace("import os\n", "import os\n" + problem) for t in (OLD, NEW))
    pins = [sdist(tmp_path, "geom", "1.0", {"geom/shapes.py": old}), sdist(tmp_path, "geom", "1.1",
                                                                              {"geom/shapes.py": new})]
    train, _, stats = ep.build(pins, tmp_path, heldout_fraction=0.0)
    assert train == [] and stats.decontaminated == 1
    clean, _, _ = ep.build([sdist(tmp_path, "geom", v, {"geom/shapes.py": t}) for v, t in (("1.0", OLD),
                                                                                          ("1.1", NEW))],
                           tmp_path, heldout_fraction=0.0)
    assert len(clean) == 1


def test_whole_packages_are_held_out_and_the_manifest_says_which(tmp_path):
    names = [f"pkg{i}" for i in range(12)]
    pins = [sdist(tmp_path, n, v, {f"{n}/shapes.py": t.replace("import os", f"import os  # {n}")})
            for n in names for v, t in (("1.0", OLD), ("2.0", NEW))]
    train, heldout, stats = ep.build(pins, tmp_path, heldout_fraction=0.5, humaneval=False)
    held = {r["package"] for r in heldout}
    assert held and {r["package"] for r in train} == set(names) - held
    assert held == {n for n in names if ep.is_heldout(f"edits:{n}", 0.5)}
    ep.write(tmp_path / "out", train, heldout, stats, tmp_path / pins[0].filename)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["heldout_packages"] == sorted(held) and len(ep.read(tmp_path / "out", "heldout")) == len(held)


def test_the_lock_takes_the_newest_stable_releases_with_an_sdist_oldest_first(monkeypatch):
    from quickcode.draft_model import pypi

    def f(name, yanked=False):
        return {"filename": name, "hashes": {"sha256": "0" * 64}, "size": 10, "yanked": yanked}
    files = [f("geom-1.0.tar.gz"), f("geom-1.1.tar.gz"), f("geom-1.2-py3-none-any.whl"), f("geom-1.2.tar.gz"),
             f("geom-1.3.tar.gz", yanked=True), f("geom-2.0rc1.tar.gz"), f("geom-1.10.tar.gz")]
    monkeypatch.setattr(pypi, "_index_files", lambda name: files)
    assert [p.version for p in pypi.resolve_releases("geom", 3)] == ["1.1", "1.2", "1.10"]
    assert pypi.resolve_releases("geom", 5) == "4 releases with an sdist"
