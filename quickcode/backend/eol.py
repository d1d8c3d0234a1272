"""Line endings: the model is shown LF only.

The models' training text is normalised to LF (quickcode/draft_model/corpus.py), so in a CRLF document
(Windows, git's `autocrlf`) every line break of the prompt would carry a `\\r` token the model never saw, and
fewer completions come out exact (docs/decisions.md#lf-prompts). Completions stay LF: editors insert text in
the document's own line ending (VS Code's and JetBrains' documents normalise inserted text, Neovim splits it
into buffer lines: a DOS file is written back CRLF, tests/editors/test_neovim.py), and a `\\r` sent back would
stay in the document as a stray character wherever a client cuts the text at a `\\n`.
"""
from __future__ import annotations


def to_lf(text: str) -> str:
    return text.replace("\r\n", "\n")
