"""`RemoteEngine`: the `Engine` on an OpenAI-compatible vLLM server or router (`engine = "openai"`), over the
official `openai` client: the prompt as token ids (our tokenizer and FIM template, from the local `model`
folder), streamed `POST /v1/completions`, cancel = closing the stream.

What the service needs and how it travels:
  * a token-id prompt: `prompt` as a list of ids (vLLM takes them as they are, no re-tokenization), or with
    `engine_prompt = "text"` their text (special tokens spelled out, `add_special_tokens` off), for a router
    that reads prompts as strings (the Gateway API Inference Extension's endpoint picker);
  * the tenant's prefix-cache salt: vLLM's `cache_salt`, and a routing key derived from it in the header
    `engine_route_header`, so that a router that pins by header (the production-stack router's session
    routing, Envoy's or nginx's consistent hash on a header) keeps a tenant on the replica that holds its
    cache;
  * abort: closing the HTTP stream (vLLM aborts a request whose client went away, streamed or not);
  * priority: vLLM's `priority` (a prefetch after the typed request), only with `engine_priority` (the server
    must run `--scheduling-policy priority`: with fcfs it refuses any priority but 0);
  * token counts: `stream_options.continuous_usage_stats` (completion tokens so far, on every chunk); cached
    tokens: the final usage's `prompt_tokens_details` (vLLM's `--enable-prompt-tokens-details`), which comes
    after the finishing chunk: that one is held back until it arrives.
Our logits processors (token healing's mask, the copy model) do not run on a remote server: settings.py makes
them give way.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from typing import Any, AsyncIterator

from tokenizers import Tokenizer

from quickcode.backend.engine import Delta, EngineStats, load_tokenizer
from quickcode.backend.fim_templates import FimTemplate
from quickcode.backend.model_info import served_max_model_len
from quickcode.backend.settings import Settings

log = logging.getLogger("quickcode.engine")
# what start() tokenizes here and on the server (`POST /tokenize`): code, indentation, a tab, non-ASCII
TOKENIZER_PROBE = "def add(a, b):\n    return a + b  # naïve sum\n\n\nclass Point:\n\tx: int = 0\n"
START_POLL_S = 1.0          # how often start() asks a server that does not answer yet


class RemoteEngine:
    """See the module docstring. `start()` blocks until the server lists the model (run it in a thread)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.stats = EngineStats()
        self.tokenizer: Tokenizer | None = None
        self.template: FimTemplate | None = None
        self.start_error: str | None = None
        self.started_s: float | None = None
        self.max_model_len = 0
        self.dtype = ""                       # the server's own business
        self.model = settings.engine_model    # the served model's name there (found at start when "")
        self.client = None                    # openai.AsyncOpenAI, once started
        self._streams: dict[str, Any] = {}   # request id → its open response stream (abort closes it)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = False

    # ── lifecycle
    def start(self) -> None:
        s = self.settings
        t0 = time.perf_counter()
        try:
            from openai import AsyncOpenAI, OpenAI

            self.tokenizer, self.template = load_tokenizer(s)
            key = s.engine_api_key.get_secret_value() or "none"   # the client insists on one
            kw = dict(base_url=s.engine_url, api_key=key, max_retries=0, timeout=s.engine_timeout_s)
            with OpenAI(**kw) as probe:
                remote_len = self._wait_for_model(probe, t0)
                self._check_tokenizer(probe)
            mine = served_max_model_len(s)
            self.max_model_len = min(remote_len, mine) if mine else remote_len
            self.client = AsyncOpenAI(**kw)
        except Exception as e:  # the engine will not serve: /readyz stays red and says why
            self.start_error = f"{type(e).__name__}: {e}"
            raise
        self.started_s = time.perf_counter() - t0
        self._ready = True
        log.info("remote engine ready in %.1f s: %s, model %r (context %d tokens), prompts as %s, "
                 "priority %s, route header %s", self.started_s, s.engine_url, self.model, self.max_model_len,
                 s.engine_prompt, "sent" if s.engine_priority else "not sent",
                 s.engine_route_header or "none")

    def _wait_for_model(self, probe, t0: float) -> int:
        """Ask `GET /models` until the server answers (it may be starting too); the model's context length."""
        import openai

        s = self.settings
        while True:
            try:
                models = {m.id: m for m in probe.models.list().data}
                break
            except (openai.APIConnectionError, openai.InternalServerError) as e:
                if time.perf_counter() - t0 > s.engine_start_timeout_s:
                    raise RuntimeError(f"{s.engine_url} did not answer in {s.engine_start_timeout_s:g} s "
                                       f"(engine_start_timeout_s): {e}") from e
                time.sleep(START_POLL_S)
        if not self.model:
            if len(models) != 1:
                raise RuntimeError(f"{s.engine_url} serves {sorted(models)}: name one in engine_model")
            self.model = next(iter(models))
        if self.model not in models:
            raise RuntimeError(f"{s.engine_url} does not serve engine_model {self.model!r} (it serves "
                               f"{sorted(models)})")
        remote_len = (models[self.model].model_extra or {}).get("max_model_len")
        if not isinstance(remote_len, int) or remote_len <= 0:
            remote_len = s.max_model_len or 0
        if not remote_len:
            raise RuntimeError(f"{s.engine_url} does not say the context length of {self.model!r} "
                               "(vLLM's max_model_len): set max_model_len")
        return remote_len

    def _check_tokenizer(self, probe) -> None:
        """The server must tokenize as our `model` folder does (it decodes our ids with its own tokenizer):
        compared through vLLM's `POST /tokenize` where the server has it (a router may not pass it on)."""
        import openai

        root = self.settings.engine_url.rstrip("/").removesuffix("/v1")
        body = {"model": self.model, "prompt": TOKENIZER_PROBE, "add_special_tokens": False}
        try:
            theirs = probe.post(f"{root}/tokenize", cast_to=object, body=body).get("tokens")
        except (openai.APIStatusError, AttributeError) as e:
            log.warning("could not compare tokenizers with %s (no vLLM /tokenize: %s): the folder %s "
                        "must hold the served model's tokenizer", root, type(e).__name__,
                        self.settings.target_path)
            return
        ours = self.tokenizer.encode(TOKENIZER_PROBE, add_special_tokens=False).ids
        if theirs != ours:
            raise RuntimeError(f"the tokenizer of {self.settings.target_path} is not the one {self.model!r} "
                               f"is served with at {root} (a probe: {ours[:6]}… here, {theirs[:6]}… there)")

    def shutdown(self) -> None:
        """Close the client's connections on the event loop that opened them (called from a thread)."""
        self._ready = False
        loop, client = self._loop, self.client
        if client is None or loop is None or loop.is_closed():
            return
        try:
            if asyncio.get_running_loop() is loop:
                loop.create_task(client.close())
                return
        except RuntimeError:   # no loop in this thread: the usual case (asyncio.to_thread)
            pass
        try:
            asyncio.run_coroutine_threadsafe(client.close(), loop).result(timeout=2.0)
        except Exception:      # the loop is stopping: the process exit closes the sockets
            pass

    @property
    def ready(self) -> bool:
        return self._ready

    @property
    def dead(self) -> bool:
        return bool(self.start_error)

    @property
    def error(self) -> str | None:
        if self.start_error:
            return self.start_error
        return None if self._ready else "engine starting (waiting for the remote server)"

    # ── requests
    def _args(self, request_id: str, prompt_ids: list[int], cache_salt: str | None, priority: int) -> dict:
        """What every request carries besides its sampling: the prompt (ids, or with `engine_prompt = "text"`
        their text, special tokens spelled out, for a router that reads prompts as strings), the tenant's salt
        and routing key, the priority, and an id that names our request in the server's logs without carrying
        client text."""
        s = self.settings
        rid = "qc-" + hashlib.blake2s(request_id.encode(), digest_size=8).hexdigest()
        extra: dict[str, Any] = {"request_id": rid, "skip_special_tokens": True}
        prompt: list[int] | str = prompt_ids
        if s.engine_prompt == "text":
            prompt = self.tokenizer.decode(prompt_ids, skip_special_tokens=False)
            extra["add_special_tokens"] = False     # the ids' own BOS and FIM tokens are in the text already
        if self.template is not None and self.template.stop_ids:
            extra["stop_token_ids"] = list(self.template.stop_ids)
        if cache_salt is not None:
            extra["cache_salt"] = cache_salt
        if s.engine_priority:
            extra["priority"] = priority
        headers = {}
        if cache_salt is not None and s.engine_route_header:
            headers[s.engine_route_header] = route_key(cache_salt)
        return {"model": self.model, "prompt": prompt, "extra_body": extra, "extra_headers": headers}

    async def generate(self, request_id: str, prompt_ids: list[int], max_tokens: int, stop: list[str],
                       temperature: float, priority: int, cache_salt: str | None = None,
                       healed: str = "") -> AsyncIterator[Delta]:
        """Stream the deltas of one completion; cancelling the consumer, closing this generator or
        `abort(request_id)` closes the HTTP stream, which ends the request on the server. `healed` is not kept
        to here (no logits processor remotely: the settings turn heal_token off)."""
        self._loop = self._loop or asyncio.get_running_loop()
        stream = await self.client.completions.create(
            max_tokens=max_tokens, temperature=temperature, stream=True,
            stream_options={"include_usage": True, "continuous_usage_stats": True},
            **_stop(stop), **self._args(request_id, prompt_ids, cache_salt, priority))
        self._streams[request_id] = stream
        self.stats.num_running += 1
        tokens, held = 0, None
        try:
            async with stream:
                async for chunk in stream:
                    usage = chunk.usage
                    if not chunk.choices:        # the final usage: what the held finishing delta waited for
                        if held is not None:
                            yield self._finished(held, len(prompt_ids), _cached(usage))
                            held = None
                        continue
                    c = chunk.choices[0]
                    now = usage.completion_tokens if usage is not None else tokens + 1
                    delta = Delta(text=c.text, num_tokens=now - tokens, finish_reason=c.finish_reason)
                    tokens = now
                    self.stats.steps += 1
                    self.stats.updated_s = time.monotonic()
                    if c.finish_reason:
                        held = delta
                    else:
                        yield delta
            if held is not None:                 # a server that sent no final usage
                yield self._finished(held, len(prompt_ids), 0)
        finally:
            self.stats.num_running -= 1
            if self._streams.get(request_id) is stream:
                del self._streams[request_id]

    def _finished(self, d: Delta, prompt_tokens: int, cached: int) -> Delta:
        """The finishing delta with the cached count; counted as this backend's finished request, and its
        prompt's prefix-cache lookups and hits."""
        self._count(d.finish_reason)
        self.stats.prefix_queries += prompt_tokens
        self.stats.prefix_hits += cached
        return Delta(text=d.text, num_tokens=d.num_tokens, finish_reason=d.finish_reason,
                     num_cached_tokens=cached)

    def _count(self, reason: str | None) -> None:
        if reason:
            self.stats.finished[reason] = self.stats.finished.get(reason, 0) + 1

    async def sample(self, request_id: str, prompt_ids: list[int], max_tokens: int, stop: list[str], n: int,
                     temperature: float, seed: int, priority: int, cache_salt: str | None = None,
                     healed: str = "", min_tokens: int = 0) -> list[tuple[str, int]]:
        """`n` completions of one request (text with the stop string that ended it, tokens), whole; cancelling
        the caller closes the connection, which aborts the request on the server."""
        self._loop = self._loop or asyncio.get_running_loop()
        args = self._args(request_id, prompt_ids, cache_salt, priority)
        args["extra_body"].update(include_stop_str_in_output=True, min_tokens=min_tokens,
                                  return_token_ids=True)   # the tokens of each choice
        self.stats.num_running += 1
        try:
            out = await self.client.completions.create(max_tokens=max_tokens, n=n, seed=seed,
                                                       temperature=temperature, **_stop(stop), **args)
        finally:
            self.stats.num_running -= 1
        choices = sorted(out.choices, key=lambda c: c.index)
        for c in choices:
            self._count(c.finish_reason)
        return [(c.text, len((c.model_extra or {}).get("token_ids") or ())) for c in choices]

    async def logprob_sums(self, request_id: str, windows: list[tuple[list[int], int]], priority: int,
                           cache_salt: str | None = None) -> list[float]:
        """For each (ids, first): Σ log P(ids[i] | ids[:i]) for i ≥ first, from vLLM's `prompt_logprobs`, one
        request per window, all at once. A window the server tokenized otherwise (a text prompt): -inf."""
        self._loop = self._loop or asyncio.get_running_loop()

        async def one(i: int, ids: list[int], first: int) -> float:
            args = self._args(f"{request_id}-s{i}", ids, cache_salt, priority)
            args["extra_body"]["prompt_logprobs"] = 0
            out = await self.client.completions.create(max_tokens=1, temperature=0.0, **args)
            lps = (out.choices[0].model_extra or {}).get("prompt_logprobs") if out.choices else None
            if not lps or len(lps) != len(ids):
                return float("-inf")
            found = [(lps[j] or {}).get(str(ids[j])) for j in range(max(1, first), len(ids))]
            return float("-inf") if None in found else sum(f["logprob"] for f in found)

        self.stats.num_running += len(windows)
        try:
            return list(await asyncio.gather(*(one(i, ids, first) for i, (ids, first) in enumerate(windows))))
        finally:
            self.stats.num_running -= len(windows)

    async def abort(self, request_id: str) -> None:
        """Close the request's stream if it is still open (a consumer that stopped reading leaves it open)."""
        stream = self._streams.pop(request_id, None)
        if stream is not None:
            await stream.close()


def route_key(cache_salt: str) -> str:
    """A tenant's routing key: stable per salt, and not the salt itself (routers log headers)."""
    return hashlib.sha256(b"route:" + cache_salt.encode()).hexdigest()[:32]


def _stop(stop: list[str]) -> dict:
    return {"stop": list(stop)} if stop else {}   # (an explicit null is not vLLM's "no stop strings")


def _cached(usage) -> int:
    details = getattr(usage, "prompt_tokens_details", None)
    return getattr(details, "cached_tokens", None) or 0
