"""A prompt's parts cut to the server's `max_prompt_chars`, counted as the server counts them (prefix +
suffix + each snippet's text and path): the language server cuts its own requests to the welcome's figure,
and the compat endpoints cut a plugin's request (llama.vim's ring of chunks, a long prefix) the same way
instead of refusing it — the prompt's token budget keeps far less than that limit anyway."""
from __future__ import annotations


def within_budget(prefix: str, suffix: str, snippets: list, max_chars: int, *,
                  drop_from_front: bool = False) -> tuple[str, str, list]:
    """The parts cut to `max_chars` characters in all (0 = no limit): snippets go first (the last ones,
    or with `drop_from_front` the first ones — llama.vim's oldest chunks), then the suffix's tail beyond a
    quarter of the budget, then the prefix's head."""
    if max_chars <= 0:
        return prefix, suffix, snippets
    snippets = list(snippets)
    def total() -> int:
        return len(prefix) + len(suffix) + sum(len(s.text) + len(s.path) for s in snippets)

    while snippets and total() > max_chars:
        snippets.pop(0 if drop_from_front else -1)
    if len(prefix) + len(suffix) > max_chars:
        suffix = suffix[:max(max_chars // 4, max_chars - len(prefix))]
        prefix = prefix[max(0, len(prefix) + len(suffix) - max_chars):]
    return prefix, suffix, snippets
