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
    room, kept = max_chars - len(prefix) - len(suffix), 0
    order = reversed(snippets) if drop_from_front else iter(snippets)
    for sn in order:                                   # the longest run that fits, from the end that stays
        room -= len(sn.text) + len(sn.path)
        if room < 0:
            break
        kept += 1
    snippets = list(snippets[len(snippets) - kept:] if drop_from_front else snippets[:kept])
    if len(prefix) + len(suffix) > max_chars:
        suffix = suffix[:max(max_chars // 4, max_chars - len(prefix))]
        prefix = prefix[max(0, len(prefix) + len(suffix) - max_chars):]
    return prefix, suffix, snippets
