"""quickcode's backend (FastAPI, one WebSocket per editor, vLLM): `quickcode serve`.

Read in the order of a request:
  cli.py         `quickcode serve` / `quickcode token`: the operator's commands
  serve.py       uvicorn around the app; SIGTERM drains before it closes
  app.py         app factory: the lifespan owns the engine and the service; /healthz, /readyz, /metrics,
                 /v1/ws
  session.py     one WebSocket: hello/welcome, frames in → the service, frames out in order
  service.py     validate → tokenize → schedule → stream from the engine → end exactly once
  live_request.py  a request while it lives: its sink, prompt, times and counts, its `Timing`
  checks.py      what a `complete` or an `edit` may ask: each field within its bounds, or a typed error
  fim.py         prefix/suffix/snippets → prompt token ids within the budget (token healing)
  edit_prompt.py a next edit's prompt (Zeta's layout: recent edits, then the excerpt with its editable
                 region and cursor marked) and the model's rewritten region → the smallest replacement
  next_edit.py   a next edit on the engine: the region's rewrite streamed to its end marker
  eol.py         line endings: the model is shown LF only
  fim_templates.py   each model family's FIM template, by its special tokens
  segments.py        fast exact tokenization by line segments, cut at line boundaries
  best_of.py     a `best_of` request: the greedy line and sampled ones, scored by rerank.py (the line the code
                 around it makes most likely), the best sent whole
  scheduler.py   pure admission logic: newest first per user, supersede, prefetch on spare capacity, shedding
  rates.py       the scheduler's forecast terms: the engine's measured speed and how late first tokens come
  engine.py      the `Engine` protocol the service streams from (`Delta`, `EngineStats`)
  vllm_engine.py   the engine on vLLM's AsyncLLM (only vllm_*.py import vLLM); vllm_stats.py its step
                   statistics; vllm_heal.py token healing when it speculates (vLLM's allowed_token_ids)
  remote_engine.py the engine on a remote OpenAI-compatible vLLM server or router (`engine = "openai"`)
  vllm_logits.py   our vLLM logits processor: copy_model.py (the prompt's own n-grams mixed in) and
                   heal_mask.py (a healed prefix's text written again by agreeing tokens)
  fake_engine.py   scripted tokens on an injected clock (fake_clock.py): tests of our own code, no vLLM
Beside the path: openai_api.py (`POST /v1/completions`), compat_api.py (llama.cpp /infill, Ollama),
debug_api.py (`/debug/*` knobs), http_gate.py (what every HTTP request passes first), auth.py (hashed
per-user tokens), first_token.py (the first token of a server started with none: the
container images), tenancy.py (who may share the prefix cache), ratelimit.py (per-user token buckets),
telemetry.py (client outcomes into bounded metrics), metrics.py (Prometheus), model_info.py (what a model
folder says about itself), cpu_features.py (is bf16 native here: the served dtype, the training step),
settings.py (the one typed source of defaults), profiles.py (which models a bare serve serves, and why),
speed_probe.py (`quickcode probe`: is the default fast enough here),
assets.py (where the shipped and the built models and configs are),
orphan_guard.py (the engine dies with us), launch.py (start a backend: a process, or in-process for tests).
For operators also: token_watch.py (the tokens file reloaded while serving, revoked sessions closed), logs.py
(text or JSON logs, the access line), settings_doc.py (the settings reference of serve --help and docs).
backend imports quickcode/protocol/ and nothing else of the project.
"""
