"""What a served model folder says about itself: the context it was trained on, its characters per token.

A model reads positions past its training context badly (docs/decisions.md#trained-context), so the
engine's `max_model_len` defaults to the trained context that `quickcode model train` records in the folder's
`quickcode_train.json` (`trained_context_tokens`). A folder without it (a third-party model) falls back to its
`config.json` `max_position_embeddings`, which is what vLLM uses by default.

A folder whose attention head size the engine's attention kernels lack (vLLM's CPU attention has no kernel for
head_dim 16) is refused before the engine starts, with the reason, rather than dying inside vLLM.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Collection

# the share of the prompt budget the client's character windows aim at: characters per token vary with the
# text (held-out code averages 3.77 on the embedded tokenizer), and a window the backend has to cut moves its
# start with the text, which costs the prefix cache its hits
WINDOW_SAFETY = 0.85
DEFAULT_CHARS_PER_TOKEN = 3.0


@dataclass(frozen=True)
class ModelInfo:
    context_tokens: int | None         # the trained context, else max_position_embeddings, else unknown
    trained_context_tokens: int | None
    chars_per_token: float


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def model_info(model_dir: Path) -> ModelInfo:
    train = _read_json(model_dir / "quickcode_train.json")
    config = _read_json(model_dir / "config.json")
    trained = train.get("trained_context_tokens")
    trained = int(trained) if isinstance(trained, int) and trained > 0 else None
    positions = config.get("max_position_embeddings")
    positions = int(positions) if isinstance(positions, int) and positions > 0 else None
    cpt = (train.get("data_summary") or {}).get("chars_per_token")
    cpt = float(cpt) if isinstance(cpt, (int, float)) and cpt > 0 else DEFAULT_CHARS_PER_TOKEN
    context = min(x for x in (trained, positions) if x) if (trained or positions) else None
    return ModelInfo(context_tokens=context, trained_context_tokens=trained, chars_per_token=cpt)


def require_model_folder(folder: Path, setting: str, files: Collection[str] = ("config.json",)) -> None:
    """An operator's typo said as such: which setting names a folder without a model (otherwise the tokenizer
    says "os error 2" and vLLM, taking the path for a Hugging Face repo id, asks the Hub)."""
    for name in files:
        if not (folder / name).is_file():
            raise FileNotFoundError(f"the model folder {folder} (setting {setting}) has no {name}"
                                    + ("" if folder.is_dir() else ": no such folder"))


def check_head_size(model_dir: Path, supported: Collection[int]) -> None:
    """Refuse (ValueError, saying why) a model folder whose attention head size is not in `supported` (the
    attention backend's `get_supported_head_sizes()`); a folder that does not say passes (vLLM decides)."""
    config = _read_json(Path(model_dir) / "config.json")
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    counted = isinstance(hidden, int) and isinstance(heads, int) and heads > 0
    head_dim = config.get("head_dim") or (hidden // heads if counted else None)
    if isinstance(head_dim, int) and head_dim not in supported:
        raise ValueError(f"{model_dir}: attention head size {head_dim} (hidden_size {hidden} / "
                         f"{heads} heads) has no kernel in this engine's attention backend (supported: "
                         f"{', '.join(map(str, sorted(supported)))}); choose the number of heads so that "
                         "hidden_size / num_attention_heads is one of them")


def served_max_model_len(settings) -> int | None:
    """The engine's context: the `max_model_len` setting, else the target's trained context, else its
    max_position_embeddings (None: unknown, vLLM's default)."""
    return settings.max_model_len or model_info(settings.target_path).context_tokens


def prompt_budget_tokens(max_prompt_tokens: int, max_model_len: int, reserve_output_tokens: int) -> int:
    """Prompt tokens sent to the engine: the configured cap, within the model's context less the tokens kept
    for the completion. It does not depend on a request's `max_tokens`, so a prefill-only warm-up and the
    completion after it build the same prompt (a longer completion is cut at the context end by vLLM)."""
    return max(16, min(max_prompt_tokens, max_model_len - reserve_output_tokens))


def context_chars(budget_tokens: int, chars_per_token: float) -> int:
    """Characters of prefix + suffix worth sending for a prompt budget (what the welcome tells clients)."""
    return int(budget_tokens * chars_per_token * WINDOW_SAFETY)
