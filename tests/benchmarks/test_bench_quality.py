"""`quickcode bench quality` against the session's real backend: HumanEval infills go through the product's
`/v1/completions` and come back whole (the streamed text is the non-streamed text), and are scored."""
from __future__ import annotations

import httpx
import pytest

from quickcode.benchmarks.quality import (TestsRunner, complete, exact_line, first_line, load_problems,
                                          single_line_tasks)

pytestmark = [pytest.mark.engine]


def test_humaneval_infills_through_the_openai_endpoint(backend):
    problems = load_problems()
    tasks = [t for t in single_line_tasks(problems) if t.problem == "HumanEval/2"]
    runner = TestsRunner(problems)
    with httpx.Client() as client:
        for t in tasks:
            got = complete(client, backend.http_url, t.prefix, t.suffix, 32)
            whole = client.post(f"{backend.http_url}/v1/completions", timeout=60, json={
                "prompt": t.prefix, "suffix": t.suffix, "max_tokens": 32, "temperature": 0}).json()
            assert got["text"] == whole["choices"][0]["text"]          # greedy: the same text streamed or not
            assert got["finish"] == whole["choices"][0]["finish_reason"]
            assert got["total_ms"] > 0 and (got["ttfc_ms"] is None) == (got["text"] == "")
            verdict = runner.verdict(t.problem, t.solution_with(first_line(got["text"])))
            assert verdict == "passed" or verdict.startswith(("failed", "timed out"))
            if first_line(got["text"]) == t.line:
                assert exact_line(got["text"], t.line) and verdict == "passed"
