"""The model folders onto a pod's volume (the gpu overlay's init container; the Python standard library only).

Environment: MODELS_URL (https://, http:// or file://: a tar, optionally compressed, of the folders as the
profile names them below models/, e.g. gpu-13b/target, gpu-13b/target-int8, gpu-13b/draft), MODELS_SHA256 (the
tar's), MODELS_DIR (the volume). A volume that holds that tar's folders already is left alone; otherwise the tar
is downloaded, checked against the hash, unpacked with tarfile's `data` filter (no absolute paths, no `..`, no
links out, no device files) beside the folders, and each folder renamed into place. The marker
`.quickcode-models.sha256` is written last, so an interrupted run starts again. Exit status 1 with one line on a
wrong hash or a bad tar, and nothing on the volume changed.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tarfile
import urllib.request
from pathlib import Path

MARKER = ".quickcode-models.sha256"
CHUNK_BYTES = 1 << 20


def fail(message: str) -> None:
    print(f"fetch_models: {message}", file=sys.stderr)
    raise SystemExit(1)


def download(url: str, into: Path) -> str:
    """Stream `url` into the file `into`; its sha256."""
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=60) as src, open(into, "wb") as dst:
        while chunk := src.read(CHUNK_BYTES):
            digest.update(chunk)
            dst.write(chunk)
    return digest.hexdigest()


def install(archive: Path, models_dir: Path) -> list[str]:
    """Unpack beside the folders, then rename each top-level folder over the old one; the names installed."""
    staging = models_dir / ".staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(staging, filter="data")
    except (tarfile.TarError, OSError) as e:
        shutil.rmtree(staging, ignore_errors=True)
        fail(f"{archive.name}: not a tar of model folders: {e}")
    names = sorted(p.name for p in staging.iterdir())
    for name in names:
        old = models_dir / f".old-{name}"
        shutil.rmtree(old, ignore_errors=True)
        if (models_dir / name).exists():
            os.replace(models_dir / name, old)
        os.replace(staging / name, models_dir / name)
        shutil.rmtree(old, ignore_errors=True)
    staging.rmdir()
    return names


def main() -> None:
    url, want = os.environ.get("MODELS_URL", ""), os.environ.get("MODELS_SHA256", "").lower()
    models_dir = Path(os.environ.get("MODELS_DIR", "/srv/quickcode/models"))
    if not url:
        print(f"fetch_models: MODELS_URL is empty: the model folders in {models_dir} are the operator's")
        return
    if len(want) != 64:
        fail("MODELS_SHA256 is not a sha256 (64 hex digits)")
    marker = models_dir / MARKER
    if marker.is_file() and marker.read_text().strip() == want:
        print(f"fetch_models: {models_dir} holds {want[:12]} already")
        return
    models_dir.mkdir(parents=True, exist_ok=True)
    archive = models_dir / ".download"
    try:
        got = download(url, archive)
        if got != want:
            fail(f"{url}: sha256 {got}, expected {want}: nothing installed")
        names = install(archive, models_dir)
    finally:
        archive.unlink(missing_ok=True)
    tmp = models_dir / f".{MARKER}.tmp"
    tmp.write_text(want + "\n")
    os.replace(tmp, marker)
    print(f"fetch_models: {', '.join(names)} from {url} ({want[:12]}) into {models_dir}")


if __name__ == "__main__":
    main()
