"""Model cards: each model folder's README.md, generated from what the folder itself records (config.json,
quickcode_train.json, quickcode_fim.json, quickcode_quant.json) and from the committed `quickcode bench quality`
report when it measured these very weights (matched by sha256). `quickcode model card DIR...` writes them;
tests/draft_model/test_model_cards.py fails when a committed card no longer matches its folder, so a retrained
model cannot keep an old card."""
from __future__ import annotations

import json
import re
from pathlib import Path

from quickcode.draft_model.quantize import sha256_of

ROLES = {
    "target": "the target model of the light profile: `quickcode serve --set profile=light` completes with it "
              "(`Settings.model`; the default profile serves a pretrained target, docs/model-card.md)",
    "draft": "the draft model of the light profile: it proposes tokens the target checks (speculative "
             "decoding, `Settings.draft_model`, `spec_method=draft`)",
    "int8": "the target quantized to W8A8 INT8: `quickcode serve --set precision=int8` (`Settings.model_int8`)",
}
LICENSE = ("Apache-2.0, like the code. Trained only on source under permissive licences: `quickcode model "
           "prepare` keeps a file only when its distribution's licence is permissive and counts every refusal.")
QUALITY_REPORT = Path("benchmarks") / "reports" / "quality.md"


def _json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _ci(ci: list | None) -> str:
    return f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else ""


def quality_figures(repo: Path, weights_sha256: str) -> list[str]:
    """The served figures of the quality report's `current` arm, if that arm ran these weights."""
    report = repo / QUALITY_REPORT
    if not report.is_file():
        return []
    text = report.read_text()
    row = re.search(r"^\| current \|[^|]*\| ([0-9a-f]{8,64}) \|", text, re.M)
    block = re.search(r"^```json\n(\{.*?\})\n```", text, re.M | re.S) or re.search(r"^(\{\n.*?\n\})$", text, re.M | re.S)
    if not row or not block or not weights_sha256.startswith(row[1]):
        return []
    cur = json.loads(block[1])["arms"]["current"]
    when = re.search(r"`quickcode bench quality` — ([0-9-]+)", text)
    out = [f"Served through `/v1/completions` by `quickcode bench quality` ({QUALITY_REPORT}"
           f"{', ' + when[1] if when else ''}; these weights, sha256 {row[1]}; 95% intervals):", ""]
    if "humaneval_exact" in cur:
        out.append(f"- HumanEval single-line infilling: exact first line {_pct(cur['humaneval_exact'])}"
                   f"{_ci(cur.get('humaneval_exact_ci95'))}, pass@1 {_pct(cur['humaneval_pass1'])}"
                   f"{_ci(cur.get('humaneval_pass1_ci95'))}; time to first chunk p50 {cur['ttfc_ms_p50']:.0f} ms, "
                   f"p95 {cur['ttfc_ms_p95']:.0f} ms")
    if "idiom_exact_served" in cur:
        # a --skip-offline report has no PyTorch figures: the served one stands alone
        plain = (f", plain prefix in PyTorch {_pct(cur['idiom_exact_plain'])}"
                 f"{_ci(cur.get('idiom_exact_plain_ci95'))}" if "idiom_exact_plain" in cur else "")
        out.append(f"- idiom lines of held-out modules ({cur['idiom_cases']} cases): served "
                   f"{_pct(cur['idiom_exact_served'])}{_ci(cur.get('idiom_exact_served_ci95'))}{plain}")
    if "typing_accepted_share" in cur:
        out.append(f"- typing sessions: {_pct(cur['typing_accepted_share'])}"
                   f"{_ci(cur.get('typing_accepted_share_ci95'))} of the typed text came from accepted completions")
    return out


def _refused(key: str, value) -> str:
    """A refusal as the manifest records it: a licence with its file count (installed sources), or a PyPI
    distribution with the licence that refused it."""
    return f"{key} {value:,}" if isinstance(value, int) else f"{key} ({value})"


def _teacher_retrained(repo: Path, train: dict) -> str:
    """When the teacher folder a draft was distilled on now holds a model trained after the draft: its date."""
    teacher = _json(Path(repo) / train["teacher"] / "quickcode_train.json") if train.get("teacher") else None
    now = (teacher or {}).get("trained_at", "")
    return now if now and now > train.get("trained_at", "") else ""


def render(model_dir: Path, repo: Path) -> str:
    model_dir = Path(model_dir)
    name = model_dir.name
    cfg = _json(model_dir / "config.json") or {}
    train = _json(model_dir / "quickcode_train.json") or {}
    fim = _json(model_dir / "quickcode_fim.json") or {}
    quant = _json(model_dir / "quickcode_quant.json")
    weights = model_dir / "model.safetensors"
    sha = sha256_of(weights)
    role = ROLES["int8"] if quant else ROLES.get(train.get("kind", "").split("-")[0], ROLES.get(name, ""))
    result = train.get("result", {})
    data = train.get("data_summary", {})
    params = result.get("params")

    lines = [f"# quickcode model `{name}`" + (f" — {train['size']}" if train.get("size") else ""), "",
             f"<!-- Generated by `quickcode model card {model_dir.relative_to(repo) if model_dir.is_relative_to(repo) else model_dir}` "
             "(quickcode/draft_model/card.py) from this folder's JSON files: regenerate it after any change, don't edit it. -->",
             "", "| | |", "|---|---|", f"| role | {role} |"]
    if cfg:
        arch = (cfg.get("architectures") or ["?"])[0]
        lines.append(f"| architecture | {arch}: {cfg.get('num_hidden_layers')} layers, hidden {cfg.get('hidden_size')}, "
                     f"{cfg.get('num_attention_heads')} attention heads ({cfg.get('num_key_value_heads')} KV), "
                     f"MLP {cfg.get('intermediate_size')}, positions up to {cfg.get('max_position_embeddings'):,} |")
    size_mb = weights.stat().st_size / 1e6
    lines.append(f"| parameters | {f'{params:,}' if params else '?'} ({size_mb:.1f} MB "
                 f"{'W8A8 INT8' if quant else cfg.get('dtype', '')} safetensors, sha256 {sha[:12]}) |")
    if fim:
        lines.append(f"| tokenizer | BPE, {cfg.get('vocab_size', 0):,} tokens; fill-in-the-middle with "
                     f"`{fim.get('prefix_token')}` `{fim.get('suffix_token')}` `{fim.get('middle_token')}`, order "
                     f"{fim.get('order', '?').upper()}"
                     + (" (the prompt ends with the prefix, the completion continues it)"
                        if fim.get("order") == "spm" and fim.get("spm_middle_token") is False else "")
                     + f", end `{fim.get('eot_token')}` (quickcode_fim.json) |")
    lines += [f"| license | {LICENSE} |", ""]

    if quant:
        lines += ["## How it was made", "", "```bash", quant.get("command", "?"), "```", "",
                  f"{quant.get('scheme')}, {quant.get('method')}"
                  f"{', SmoothQuant ' + str(quant['smoothquant']) if quant.get('smoothquant') else ''}; calibrated on "
                  f"{quant['calibration']['samples']} samples of {quant['calibration']['seq_len']} tokens from "
                  f"`{quant['calibration']['source']}`; from `{quant.get('source')}` (sha256 "
                  f"{str(quant.get('source_sha256', ''))[:12]}) on {quant.get('quantized_at')} with "
                  + ", ".join(f"{k} {v}" for k, v in quant.get("versions", {}).items()) + ".", ""]
        b, q, v = quant["heldout_bf16"], quant["heldout_int8"], quant.get("vllm", {})
        lines += ["## Figures", "",
                  f"- held-out loss {b['loss']:.4f} (bf16) → {q['loss']:.4f} (INT8): Δ {quant['loss_delta']:+.4f}; "
                  f"next-token top-1 {_pct(b['top1'])} → {_pct(q['top1'])} ({q['tokens']:,} tokens)"]
        if v:
            lines.append(f"- greedy output in vLLM vs the bf16 target: {_pct(v['identical'])} of {v['prompts']} prompts "
                         f"identical, {_pct(v['token_agreement'])} of {v['reference_tokens']} tokens agree")
        lines += [f"- the folder: {quant['size_bytes'] / 1e6:.1f} MB vs {quant['source_size_bytes'] / 1e6:.1f} MB for the bf16 target", ""]
    else:
        lines += ["## Training", ""]
        if train.get("run_command"):        # a cooldown branch: the run it branched from, then the branch
            lines += ["The run:", "", "```bash", train["run_command"], "```", "",
                      f"and its cooldown branch (from the latest checkpoint of `{train.get('cooldown_from')}`):", ""]
        lines += ["```bash", train.get("command", "?"), "```", ""]
        facts = [f"{train.get('kind', '?')} model, trained {train.get('trained_at', '?')} on "
                 f"{train.get('machine', {}).get('cpu', '?')} (Python {train.get('machine', {}).get('python', '?')})"]
        if result:
            facts.append(f"{result['steps']:,} steps, {result['tokens'] / 1e6:.1f} M tokens, "
                         f"{result['elapsed_s'] / 3600:.2f} h")
        if train.get("teacher"):
            facts.append(f"distilled on the logits of `{train['teacher']}`"
                         + (f", starting from `{train['init']}`" if train.get("init") else ""))
        lines += ["; ".join(facts) + ".", ""]
        stale = _teacher_retrained(repo, train)
        if stale:
            lines += [f"The teacher was the `{train['teacher']}` of that date: the one there now was trained later "
                      f"({stale}), so this draft was not distilled on it (re-distil: docs/model-team.md, step 3).", ""]
    if data:
        lines += ["## Data", "",
                  f"- train: {data['train_docs']:,} documents, {data['train_tokens'] / 1e6:.2f} M tokens; held out: "
                  f"{data['heldout_docs']:,} documents, {data['heldout_tokens'] / 1e3:.0f} k tokens "
                  f"({data.get('chars_per_token')} characters per token)"]
        lic = train.get("data_licences")
        if lic:
            lines.append("- licences of the kept files: " + ", ".join(f"{k} {v:,}" for k, v in sorted(lic.items())))
            refused = train.get("data_refused_licences") or {}
            lines.append("- refused: " + (", ".join(_refused(k, v) for k, v in sorted(refused.items())) or "none"))
        else:
            lines.append("- sources: not recorded in quickcode_train.json by the pipeline that made this model; "
                         "docs/model-history.md (\"What is committed in `models/`\") lists them")
        held = train.get("heldout_modules", [])
        if held:
            lines.append(f"- held out of training (the benchmarks type these): {', '.join(f'`{m}`' for m in held)}")
        lines.append("")
    if result and not quant:
        lines += ["## Figures", "",
                  f"- held out: loss {result['loss']:.3f}, perplexity {result['ppl']:.1f}, next-token top-1 "
                  f"{_pct(result['top1'])} (train loss {result['train_loss']:.3f})"]
        served = quality_figures(repo, sha) if not train.get("teacher") else []
        lines += (["", *served] if served else
                  ["- served quality: `quickcode bench quality` has no report of these weights yet"
                   if not train.get("teacher") else
                   "- as a draft: acceptance and speed-ups by K in benchmarks/reports/draft.md (`quickcode bench draft`)"])
        lines.append("")
    lines += ["## Limits", "",
              "A tiny model trained on a 2-core CPU so that the embedded default runs anywhere: it shows the system "
              "working end to end, not useful completion quality. For real use serve a real code model "
              "(docs/operators.md: bring your own model, the GPU profile `configs/gpu-13b-int8.toml`).", ""]
    return "\n".join(lines)


def write(model_dirs: list[Path], repo: Path, check: bool = False) -> list[Path]:
    """Write each folder's README.md (or, with check, return the folders whose card is out of date)."""
    stale = []
    for d in model_dirs:
        card = render(d, repo)
        path = Path(d) / "README.md"
        if (path.read_text() if path.is_file() else None) != card:
            stale.append(Path(d))
            if not check:
                path.write_text(card)
    return stale
