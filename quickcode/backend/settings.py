"""The backend's one typed source of defaults: environment (QUICKCODE_*) over a TOML file over these values.

The defaults are the embedded default: `profile` (quickcode/backend/profiles.py) fills in the model settings
left unset — the pretrained target built at set-up, or the light 4.2M-parameter one;
`configs/gpu-13b-int8.toml` is the GPU profile of the same code. Set QUICKCODE_CONFIG=path.toml to load a file
(or the name of a shipped config: QUICKCODE_CONFIG=gpu-13b-int8).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, PrivateAttr, SecretStr, field_validator, model_validator
from pydantic_settings import (BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict,
                               TomlConfigSettingsSource)

from quickcode.backend import profiles, speed_probe
from quickcode.backend.assets import config_path, models_dir
from quickcode.backend.copy_model import parse_lambdas
from quickcode.backend.cpu_features import cpu_flags, native_bf16_flags

MODELS = models_dir()   # the checkout's models/, or the installed wheel's copy


class Settings(BaseSettings):
    # every field's docstring is its description: `quickcode serve --help` and docs/settings.md show it
    # (quickcode/backend/settings_doc.py): one line of why, and a pointer to its entry of docs/decisions.md
    model_config = SettingsConfigDict(env_prefix="QUICKCODE_", extra="forbid", use_attribute_docstrings=True)

    # ── network
    host: str = "127.0.0.1"
    """The address to listen on; beyond loopback the server needs API tokens or `allow_open`."""
    port: int = 8765
    """The TCP port of HTTP and the WebSocket (/v1/ws)."""
    ssl_certfile: Path | None = None
    """TLS certificate (PEM); with `ssl_keyfile` uvicorn serves wss:// and https://."""
    ssl_keyfile: Path | None = None
    """The TLS private key (PEM) of `ssl_certfile`."""
    replica_id: str = Field(default_factory=lambda: os.environ.get("HOSTNAME", "") or f"pid{os.getpid()}")
    """This replica's name in /readyz and the welcome frame (unset: $HOSTNAME, else pid<N>)."""

    # ── models
    profile: Literal["auto", "default", "light"] = "auto"
    """The embedded profile filling the unset model settings (quickcode/backend/profiles.py); auto: default
    where `quickcode probe` found it fast enough here (not probed: a GPU or native bf16), else light."""
    model: Path = MODELS / "target"
    """The bf16 target model folder, served when `precision` is bf16."""
    model_int8: Path = MODELS / "target-int8"
    """The INT8 target folder (W8A8 compressed-tensors), served when `precision` is int8."""
    precision: Literal["bf16", "int8"] = "bf16"
    """Which target is served: bf16 serves `model`, int8 serves `model_int8`."""
    draft_model: Path = MODELS / "draft"
    """The draft model folder, for spec_method = draft (same vocabulary as the target; checked)."""
    spec_method: Literal["draft", "ngram", "off"] = "off"
    """Speculative decoding: a draft model, prompt n-grams, or off (on a CPU speculation delays the first
    token, the one a word-sized request waits for; the GPU profile speculates: docs/decisions.md#spec-off)."""
    num_speculative_tokens: int = 2
    """K: tokens proposed per step when spec_method is draft or ngram."""
    served_model_name: str = "quickcode-embedded"
    """The model name clients are told (welcome frame, the OpenAI `model`)."""
    fim_order: Literal["psm", "spm", "auto"] = "auto"
    """Prefix-suffix-middle or suffix-prefix-middle; auto: the template's (quickcode_fim.json or preset)."""
    fim_template: Literal["auto", "codegemma", "qwen2.5-coder", "deepseek-coder", "codellama", "codestral",
                          "starcoder2", "starcoder"] = "auto"
    """The FIM template: auto is the model folder's quickcode_fim.json, else the preset its special tokens
    match (quickcode/backend/fim_templates.py; the table in docs/operators.md)."""
    fim_policy: Literal["always", "mid_line", "never"] = "mid_line"
    """always: every prompt is FIM (real models); mid_line: FIM only when text follows the cursor on its line
    (the embedded tiny target infills badly); never: the plain prefix (a model with no FIM tokens)."""
    heal_space: bool = True
    """A prefix ending in a space gives it back: the model writes it with the next word (fim.py `heal`)."""
    heal_token: bool = True
    """A prefix gives back what one token can write of its last piece, and the model writes it again with
    tokens that agree with it (heal_mask.py): the prompt then ends where training tokens end
    (docs/decisions.md#heal-token)."""
    heal_line_end: bool = True
    """With heal_token, a prefix ending in a line end gives back that newline: the model writes it with the
    indentation it wants (a lone newline token came only before column-0 code in training;
    docs/decisions.md#heal-line-end)."""
    copy_lambdas: str = "0.1,0.2,0.3,0.4"
    """A copy model of the request's own tokens mixed into the target's next-token distribution: λ for matches
    of 1, 2, 3, … tokens, comma-separated; "" is off (quickcode/backend/copy_model.py;
    docs/decisions.md#copy-model)."""
    copy_max_n: int = Field(default=4, ge=1, le=16)
    """The longest n-gram the copy model matches."""
    completions_best_of: int = Field(default=1, ge=1, le=9)
    """POST /v1/completions without `best_of`: 1 is the greedy completion, streamed; 2..9 the first line only,
    the best of that many by the likelihood of the code around them (quickcode/backend/rerank.py), sent
    whole."""

    # ── engine (embedded vLLM, or a remote OpenAI-compatible server: docs/operators.md)
    engine: Literal["embedded", "openai"] = "embedded"
    """embedded: vLLM in this process; openai: an OpenAI-compatible vLLM server or router (remote_engine.py),
    with prompts built from the `model` folder's tokenizer (no weights needed) and vLLM's settings its own."""
    engine_url: str = ""
    """engine = openai: the server's (or router's) OpenAI base URL, e.g. http://vllm-router:8000/v1."""
    engine_api_key: SecretStr = Field(default="", validate_default=True)
    """engine = openai: the server's API key (vLLM's --api-key; "" none), kept out of logs and reprs."""
    engine_model: str = ""
    """engine = openai: the served model's name there; "" the only one it lists."""
    engine_prompt: Literal["ids", "text"] = "ids"
    """engine = openai: the prompt as token ids (exact), or as their text (special tokens spelled out; the
    server tokenizes it again) for a router that reads prompts as strings (llm-d, the Gateway API Inference
    Extension)."""
    engine_priority: bool = False
    """engine = openai: send vLLM our priority (a prefetch behind typed requests); the server must run
    --scheduling-policy priority (with fcfs it refuses any priority but 0)."""
    engine_route_header: str = "x-user-id"
    """engine = openai: the header carrying the tenant's routing key (a hash of its cache salt; "" none), for
    a router that pins by header (production-stack --routing-logic session --session-key x-user-id)."""
    engine_timeout_s: float = Field(default=30.0, gt=0)
    """engine = openai: the connect and read timeout of a request to the server."""
    engine_start_timeout_s: float = Field(default=600.0, gt=0)
    """engine = openai: how long start-up waits for the server to answer and list the model."""

    # ── vLLM engine (embedded)
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    """auto: on a CPU bfloat16 where it is native (AVX512-BF16, AMX-BF16, Arm BF16), float32 where it would be
    emulated (several times slower there: docs/decisions.md#dtype-auto); on a GPU the model's own dtype."""
    max_model_len: int | None = None
    """Context tokens; unset: the context the model was trained on (quickcode_train.json), else its
    max_position_embeddings (positions past the trained context make a small model's completions useless)."""
    block_size: int = 32
    """KV-cache block tokens: CPU attention needs a multiple of 32; small so that growing prompts hit."""
    enable_prefix_caching: bool = True
    """Reuse the KV cache of prompt prefixes seen before (within a tenant: `cache_isolation`)."""
    cache_isolation: Literal["auto", "user", "team", "shared"] = "auto"
    """Who may hit whose prefix-cache blocks: user, team (the token record's team), shared (a hit tells a user
    that someone sent the same text), or auto: user, shared on an open loopback server
    (quickcode/backend/tenancy.py)."""
    kv_cache_gib: float = 1.0
    """The KV cache on a CPU (VLLM_CPU_KVCACHE_SPACE)."""
    cpu_reserved_cores: int | None = Field(default=None, ge=0)
    """On a CPU, cores kept free of the model's threads for vLLM's scheduler process
    (VLLM_CPU_NUM_OF_RESERVED_CPU); unset: vLLM's own rule, one core, which on 2 cores halves the model's
    (docs/decisions.md#cpu-reserved-cores)."""
    gpu_memory_utilization: float = 0.90
    """The share of GPU memory vLLM may take (weights and KV cache)."""
    enforce_eager: bool = True
    """No CUDA graphs or compilation: a faster start and no compile-cache trouble (the CPU default)."""
    tensor_parallel_size: int = 1
    """GPUs one model copy is split over, in a node (docs/operators.md)."""
    pipeline_parallel_size: int = 1
    """Layer stages, usually one per node (multi-node: with Ray)."""
    data_parallel_size: int = 1
    """Model copies inside this one engine (vLLM balances between them)."""
    distributed_executor_backend: Literal["mp", "ray"] | None = None
    """How vLLM runs its workers; unset: vLLM picks (mp on one node)."""
    max_num_seqs: int = 32
    """Sequences the engine runs at once."""
    preload_iomp: bool = True
    """LD_PRELOAD Intel OpenMP for the engine (vLLM's speculative decoding on a CPU needs it)."""
    engine_log_stats: bool = True
    """vLLM's step statistics: the speculation and prefix-cache metrics come from them."""

    # ── scheduler (quickcode/backend/scheduler.py)
    scheduler: Literal["latency", "fifo", "priority"] = "latency"
    """latency: newest first per user, supersede, prefetch on spare capacity, shedding; fifo and priority:
    baselines that pass every request to vLLM at once (in arrival order; vLLM's priorities newest first)."""
    max_running: int = 4
    """Requests in the engine at once; the others wait in the admission queue."""
    per_user_inflight: int = 2
    """Requests of one user in the engine at once (fairness between users)."""
    ttft_budget_ms: float = 200.0
    """The first-token budget: a request whose predicted wait would break it is shed."""
    prefetch_max_running_share: float = 0.5
    """Prefetches only start while fewer than this share of max_running run."""
    shed_enabled: bool = True
    """Shed requests that cannot meet ttft_budget_ms (finish reason `shed`) rather than serve them late."""
    admit_cap: int = 0
    """fifo and priority only: a request over this many live ones is answered `shed` at once (0: no cap)."""
    debug_endpoints: bool = False
    """Serve POST /debug/scheduler (benchmarks switch fifo/latency on one engine); needs
    admin_token_sha256."""
    admin_token_sha256: str = ""
    """The SHA-256 of the one token /debug/* takes (`quickcode token admin`), and needs."""

    # ── limits (typed errors beyond these)
    max_frame_bytes: int = 1 << 20
    """The largest WebSocket frame a client may send."""
    max_body_bytes: int = 1 << 20
    """The largest HTTP request body: 413 before parsing (quickcode/backend/http_gate.py)."""
    max_prompt_chars: int = 64_000
    """The largest prefix + suffix + snippets of one request."""
    max_prompt_tokens: int = 1536
    """Prompt tokens per request: a longer prompt is cut (prefix head, suffix tail) to fit."""
    reserve_output_tokens: int = 64
    """Tokens kept for the completion: the prompt is also cut to max_model_len less this many
    (quickcode/backend/model_info.py)."""
    max_tokens_limit: int = 256
    """The largest `max_tokens` a request may ask for."""
    max_requests_per_session: int = 64
    """Requests queued and running per connection."""
    rate_limit_per_s: float = 50.0
    """Requests per second per user (a token bucket)."""
    rate_limit_burst: int = 100
    """Requests a user may send at once beyond that rate (the bucket's size)."""
    telemetry_rate_per_s: float = 20.0
    """Telemetry frames per second per user; frames over it are dropped (counted)."""
    telemetry_burst: int = 100
    """Telemetry frames a user may send at once beyond that rate."""
    max_sessions: int = 20_000
    """Open WebSocket sessions of the whole server."""
    max_sessions_per_user: int = 16
    """Sessions one token may hold (a user's editors and tools): one user cannot take every session slot."""
    hello_timeout_s: float = 10.0
    """From the connection to the hello frame, however many frames come before it."""

    # ── auth
    auth_tokens_file: Path | None = None
    """Hashed tokens from `quickcode token issue`, reloaded when the file changes; unset (and no auth_tokens):
    an open server, for loopback."""
    tokens_reload_s: float = Field(default=1.0, ge=0.0)
    """How often the tokens file is checked for a change; 0: only at SIGHUP (which also reloads at once)."""
    auth_tokens: str = ""
    """Hashed entries inline, besides the file: "user:sha256hex[:team],user2:..." (e.g. from a Secret)."""
    metrics_token_sha256: str = ""
    """Prometheus with auth on: the SHA-256 of a scrape-only token (it opens /metrics and nothing else)."""
    metrics_bind: str = ""
    """/metrics on a separate listener without auth, "host:port" (a port only Prometheus reaches)."""
    allow_open: bool = False
    """An open server (no tokens) may listen beyond loopback only if this is true (logged loudly at start)."""
    auth_bootstrap_dir: Path | None = None
    """Instead of refusing an open bind beyond loopback: make one token at the first start into this folder
    (quickcode/backend/first_token.py; the container images set a volume); unset: refuse."""
    allowed_origins: list[str] = []
    """Browser origins allowed to call the server: editors and CLIs send no Origin, a web page does (and every
    page the developer opens can reach ws://127.0.0.1), refused unless listed here."""

    # ── lifecycle and logs
    shutdown_drain_s: float = 5.0
    """At SIGTERM, how long running requests may finish before every session is closed."""
    log_level: str = "info"
    """The Python logging level of the server: debug, info, warning, error."""
    log_format: Literal["text", "json"] = "text"
    """text lines, or one JSON object a line (for a log collector; the engine processes' own lines stay
    text)."""
    access_log: bool = False
    """One line per completion: request id, user, route, status, queue/ttft/total ms and tokens."""

    _profile_served: str = PrivateAttr("")
    _profile_why: str = PrivateAttr("")

    @model_validator(mode="after")
    def _apply_profile(self) -> "Settings":
        if {"model", "model_int8"} & self.model_fields_set:
            self._profile_served, self._profile_why = "custom", "a model was named (model or model_int8)"
            return self
        built = profiles.default_built()
        probe = speed_probe.read_record() if built and self.profile == "auto" else None
        name, why = profiles.choose_profile(self.profile, native_bf16_flags(cpu_flags()), profiles.has_gpu(),
                                            built, probe)
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
    def _remote_engine_needs_a_url(self) -> "Settings":
        if self.engine == "openai":
            if not self.engine_url.startswith(("http://", "https://")):
                raise ValueError('engine = "openai" needs engine_url, the server\'s base URL '
                                 f"(http(s)://host:port/v1), got {self.engine_url!r}")
            if self.spec_method != "off":
                raise ValueError('spec_method is the remote server\'s own with engine = "openai" (vLLM\'s '
                                 '--speculative-config there): leave it "off"')
        return self

    @model_validator(mode="after")
    def _logits_processing_needs_plain_decoding(self) -> "Settings":
        # The copy model is a logits processor of ours, run inside an embedded vLLM that decodes plainly: vLLM
        # 0.32 verifies speculated tokens without custom logits processors (the copy model would mix into some
        # tokens and not others), and a remote server (engine = "openai") loads none of ours. Token healing
        # speculates too: a speculating engine heals with vLLM's own allowed_token_ids
        # (vllm_heal.py); only a remote server cannot heal. Left at their defaults they give way; set,
        # refused.
        if self.engine == "openai":
            needs = 'engine = "embedded" (a remote server runs no logits processor of ours)'
            off = ("copy_lambdas", "heal_token")
        elif self.spec_method != "off":
            needs = 'spec_method = "off" (vLLM verifies speculated tokens without custom logits processors)'
            off = ("copy_lambdas",)
        else:
            return self
        asked = {"copy_lambdas": bool(parse_lambdas(self.copy_lambdas)), "heal_token": self.heal_token}
        for name in off:
            if asked[name] and name in self.model_fields_set:
                raise ValueError(f"{name} needs {needs}")
        self.copy_lambdas = ""
        if "heal_token" in off:
            self.heal_token = False
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
