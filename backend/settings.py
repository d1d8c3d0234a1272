"""The backend's one typed source of defaults: environment (QUICKCODE_*) over a TOML file over these values.

The defaults are the embedded default: `profile` (backend/profiles.py) fills in the model settings left
unset — the pretrained target built at set-up, or the light 4.2M-parameter one; `configs/gpu-13b-int8.toml`
is the GPU profile of the same code. Set QUICKCODE_CONFIG=path.toml to load a file (or the name of a shipped
config: QUICKCODE_CONFIG=gpu-13b-int8).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator
from pydantic_settings import (BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict,
                               TomlConfigSettingsSource)

from backend import profiles
from backend.assets import config_path, models_dir
from backend.copy_model import parse_lambdas
from backend.cpu_features import cpu_flags, native_bf16_flags

MODELS = models_dir()   # the checkout's models/, or the installed wheel's copy


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="QUICKCODE_", extra="forbid")

    # ── network
    host: str = "127.0.0.1"
    port: int = 8765
    ssl_certfile: Path | None = None          # TLS: give both files (uvicorn serves wss:// and https://)
    ssl_keyfile: Path | None = None
    replica_id: str = Field(default_factory=lambda: os.environ.get("HOSTNAME", "") or f"pid{os.getpid()}")

    # ── models
    # which embedded profile fills in the model settings left unset (backend/profiles.py): auto = the
    # default where this machine runs it within the typing budget, else light. Naming a `model` or
    # `model_int8` serves that model with these fields' own defaults (no profile)
    profile: Literal["auto", "default", "light"] = "auto"
    model: Path = MODELS / "target"
    model_int8: Path = MODELS / "target-int8"
    precision: Literal["bf16", "int8"] = "bf16"   # int8 serves `model_int8` (W8A8 compressed-tensors)
    draft_model: Path = MODELS / "draft"
    # why: on a CPU speculation delays the first token, the one a word-sized request waits for; the GPU
    # profile speculates (docs/decisions.md#spec-off)
    spec_method: Literal["draft", "ngram", "off"] = "off"
    num_speculative_tokens: int = 2   # K draft tokens per step when spec_method is draft or ngram
    served_model_name: str = "quickcode-embedded"
    fim_order: Literal["psm", "spm", "auto"] = "auto"   # auto: the template's (quickcode_fim.json or preset)
    # auto: the model folder's quickcode_fim.json, else the preset detected from the tokenizer's special
    # tokens; or a preset by name (backend/fim_templates.py PRESETS; the table in docs/operators.md)
    fim_template: Literal["auto", "codegemma", "qwen2.5-coder", "deepseek-coder", "codellama", "codestral",
                          "starcoder2", "starcoder"] = "auto"
    # mid_line: fill-in-the-middle only when text follows the cursor on its line, else the plain prefix (the
    # embedded tiny target infills badly: backend/fim.py `uses_fim`); always: every prompt is FIM (real
    # models); never: the plain prefix only (a model with no FIM tokens, e.g. one imported from a registry
    # wheel; its quickcode_fim.json `prefix_only` makes it so whatever this says)
    fim_policy: Literal["always", "mid_line", "never"] = "mid_line"
    heal_space: bool = True               # a prefix ending in a space: the model writes it (fim.py `heal`)
    # and a prefix ending in anything else gives back what one token can write of its last piece (`super().` →
    # `super` + `().`, `controlCharP` → `controlChar` + `P`): the model
    # writes it again with tokens that agree with it (a vLLM logits processor keeps it to them; heal_mask.py).
    # why: the prompt then ends where training tokens end (docs/decisions.md#heal-token)
    heal_token: bool = True
    # with heal_token, a prefix ending in a line end (the cursor at column 0) gives back that newline: the
    # model writes it with the indentation it wants (why: a lone newline token came only before column-0 code
    # in training; docs/decisions.md#heal-line-end)
    heal_line_end: bool = True
    # a copy model of the request's own tokens mixed into the target's next-token distribution (a vLLM logits
    # processor; backend/copy_model.py): λ for matches of 1, 2, 3, … tokens, comma-separated ("" = off)
    # (docs/decisions.md#copy-model)
    copy_lambdas: str = "0.1,0.2,0.3,0.4"
    copy_max_n: int = Field(default=4, ge=1, le=16)   # the longest n-gram the copy model matches
    # `POST /v1/completions` without `best_of`: 1 = the greedy completion, streamed; 2..9 = the first line
    # only, the best of the greedy line and best_of - 1 sampled ones by the likelihood of the code around
    # them (backend/rerank.py), whole
    completions_best_of: int = Field(default=1, ge=1, le=9)

    # ── vLLM engine
    # auto: on a CPU bfloat16 where it is native (AVX512-BF16, AMX-BF16, Arm BF16), float32 where it would be
    # emulated (several times slower there: docs/decisions.md#dtype-auto); on a GPU the model's own dtype
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    # None: the context the model was trained on (its quickcode_train.json `trained_context_tokens`), else its
    # max_position_embeddings — positions past the trained context make a small model's completions useless
    max_model_len: int | None = None
    block_size: int = 32                  # CPU attention needs a multiple of 32; small so growing prompts hit
    enable_prefix_caching: bool = True
    # who may hit whose prefix-cache blocks (backend/tenancy.py): user | team (the token record's team) |
    # shared (everyone: a hit tells a user that someone sent the same text) | auto (user; shared on an open
    # loopback server)
    cache_isolation: Literal["auto", "user", "team", "shared"] = "auto"
    kv_cache_gib: float = 1.0             # VLLM_CPU_KVCACHE_SPACE on CPU
    gpu_memory_utilization: float = 0.90
    enforce_eager: bool = True            # CPU: faster start, no compile-cache trouble
    tensor_parallel_size: int = 1         # GPUs one model copy is split over, in a node (docs/operators.md)
    pipeline_parallel_size: int = 1       # layer stages, usually one per node (multi-node: with Ray)
    data_parallel_size: int = 1           # model copies inside this one engine (vLLM balances between them)
    distributed_executor_backend: Literal["mp", "ray"] | None = None   # None: vLLM picks (mp on one node)
    max_num_seqs: int = 32
    preload_iomp: bool = True             # LD_PRELOAD Intel OpenMP for the engine (vLLM: spec decode on CPU)
    engine_log_stats: bool = True

    # ── scheduler (backend/scheduler.py)
    scheduler: Literal["latency", "fifo"] = "latency"
    max_running: int = 4                  # requests in the engine at once
    per_user_inflight: int = 2
    ttft_budget_ms: float = 200.0         # shed when the predicted wait would break it
    prefetch_max_running_share: float = 0.5  # prefetches only start below this share of max_running
    shed_enabled: bool = True
    debug_endpoints: bool = False         # POST /debug/scheduler (benchmarks: fifo/latency on one engine)
    admin_token_sha256: str = ""          # the one token /debug/* takes (`quickcode token admin`), and needs

    # ── limits (typed errors beyond these)
    max_frame_bytes: int = 1 << 20
    max_body_bytes: int = 1 << 20         # HTTP request bodies: 413 before parsing (backend/http_gate.py)
    max_prompt_chars: int = 64_000
    max_prompt_tokens: int = 1536         # the prompt is cut (prefix head, suffix tail) to fit
    # ... and to max_model_len less this many tokens kept for the completion (backend/model_info.py)
    reserve_output_tokens: int = 64
    max_tokens_limit: int = 256
    max_requests_per_session: int = 64    # queued + running per connection
    rate_limit_per_s: float = 50.0        # per user, token bucket
    rate_limit_burst: int = 100
    telemetry_rate_per_s: float = 20.0    # per user; telemetry frames over it are dropped (counted)
    telemetry_burst: int = 100
    max_sessions: int = 20_000
    max_sessions_per_user: int = 16       # one token cannot take every session slot (a user's editors, tools)
    hello_timeout_s: float = 10.0         # from the connection, however many frames come before hello

    # ── auth
    auth_tokens_file: Path | None = None  # hashed tokens from `quickcode token issue`; None = open (loopback)
    auth_tokens: str = ""                 # or hashed entries inline "user:sha256hex[:team],user2:..." (env)
    # Prometheus with auth on: a scrape-only token (its sha256; it opens /metrics and nothing else) ...
    metrics_token_sha256: str = ""
    # ... and/or /metrics on a separate listener without auth, "host:port" (a port only Prometheus reaches)
    metrics_bind: str = ""
    # an open server (no tokens) may listen beyond loopback only if this is true (logged loudly at start)
    allow_open: bool = False
    # browser origins allowed to call the server (WebSocket and HTTP). Editors and CLI tools send no Origin; a
    # web page does, and every page the developer opens can reach ws://127.0.0.1 — refused unless listed here
    allowed_origins: list[str] = []

    # ── lifecycle
    shutdown_drain_s: float = 5.0
    log_level: str = "info"

    _profile_served: str = PrivateAttr("")
    _profile_why: str = PrivateAttr("")

    @model_validator(mode="after")
    def _apply_profile(self) -> "Settings":
        if {"model", "model_int8"} & self.model_fields_set:
            self._profile_served, self._profile_why = "custom", "a model was named (model or model_int8)"
            return self
        name, why = profiles.choose_profile(self.profile, native_bf16_flags(cpu_flags()), profiles.has_gpu())
        for key, value in profiles.profile_settings(name).items():
            if key not in self.model_fields_set:
                setattr(self, key, value)
        self._profile_served, self._profile_why = name, why
        return self

    @property
    def profile_served(self) -> str:
        """The profile whose values filled the unset model settings (`auto` resolved; `custom`: none)."""
        return self._profile_served

    @property
    def profile_why(self) -> str:
        return self._profile_why

    @field_validator("copy_lambdas")
    @classmethod
    def _copy_lambdas(cls, v: str) -> str:
        parse_lambdas(v)         # a clear error at start-up, not in the engine process
        return v

    @model_validator(mode="after")
    def _logits_processing_needs_plain_decoding(self) -> "Settings":
        # vLLM 0.32 verifies speculated tokens without custom logits processors: the copy model would mix into
        # some tokens and not others (greedy output would depend on speculation), and the healing mask would
        # not hold past the first token. Left at their defaults they give way to speculation; set, refused.
        if self.spec_method == "off":
            return self
        asked = {"copy_lambdas": bool(parse_lambdas(self.copy_lambdas)), "heal_token": self.heal_token}
        for name, on in asked.items():
            if on and name in self.model_fields_set:
                raise ValueError(f"{name} needs spec_method = \"off\" (vLLM verifies speculated tokens "
                                 "without custom logits processors)")
        self.copy_lambdas, self.heal_token = "", False
        return self

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings],
                                   init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource):
        sources = [init_settings, env_settings]
        if os.environ.get("QUICKCODE_CONFIG"):
            toml_file = config_path(os.environ["QUICKCODE_CONFIG"])
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_file))
        return tuple(sources)

    @property
    def target_setting(self) -> str:
        """The setting that names the served target's folder."""
        return "model_int8" if self.precision == "int8" else "model"

    @property
    def target_path(self) -> Path:
        return getattr(self, self.target_setting)
