"""Editor-like fixtures: a text with a cursor marker ║ (Tabby agent style)."""
from quickcode.lsp_client.context import Context, build

CURSOR = "║"


def at(text: str, language: str = "python", path: str = "demo.py", prefix_max_chars: int = 3000,
       suffix_max_chars: int = 800, quantum: int = 16) -> tuple[str, int, Context]:
    """(document text, cursor offset, context) of a fixture like `def add(a, b):\\n    ║`."""
    offset = text.index(CURSOR)
    doc = text.replace(CURSOR, "")
    return doc, offset, build(doc, offset, language, path, prefix_max_chars=prefix_max_chars,
                              suffix_max_chars=suffix_max_chars, quantum=quantum)
