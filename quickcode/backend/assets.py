"""Where the shipped models and configs are: the checkout's models/ and configs/ when the code runs from one,
else the copies an installed wheel carries as quickcode/backend/models/ and quickcode/backend/configs/
(pyproject.toml)."""
from __future__ import annotations

import os
from pathlib import Path

_HERE = Path(__file__).resolve().parent
CHECKOUT = _HERE.parents[1]   # quickcode/backend/ → the checkout


def models_dir() -> Path:
    """$QUICKCODE_MODELS_DIR, else the checkout's models/, else the wheel's quickcode/backend/models/."""
    if os.environ.get("QUICKCODE_MODELS_DIR"):
        return Path(os.environ["QUICKCODE_MODELS_DIR"])
    if (CHECKOUT / "models" / "target" / "quickcode_fim.json").is_file():
        return CHECKOUT / "models"
    return _HERE / "models"


def built_models_dir() -> Path:
    """Where set-up builds the models that are made from registry packages rather than committed (the default
    target): $QUICKCODE_BUILT_MODELS_DIR, else the checkout's runs/models/, else the user's cache."""
    if os.environ.get("QUICKCODE_BUILT_MODELS_DIR"):
        return Path(os.environ["QUICKCODE_BUILT_MODELS_DIR"])
    if (CHECKOUT / "pyproject.toml").is_file() and (CHECKOUT / "models").is_dir():
        return CHECKOUT / "runs" / "models"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "quickcode" / "models"


def configs_dir() -> Path:
    if (CHECKOUT / "configs").is_dir() and (CHECKOUT / "pyproject.toml").is_file():
        return CHECKOUT / "configs"
    return _HERE / "configs"


def config_path(name: str | Path) -> Path:
    """A config file by path, or a shipped config by name: `gpu-13b-int8` or `gpu-13b-int8.toml`."""
    path = Path(name)
    if path.is_file():
        return path
    shipped = configs_dir() / (path.name if path.suffix == ".toml" else f"{path.name}.toml")
    if path.parent == Path(".") and shipped.is_file():
        return shipped
    known = ", ".join(sorted(p.stem for p in configs_dir().glob("*.toml"))) or "none"
    raise FileNotFoundError(f"no config file {str(name)!r} (shipped configs: {known})")
