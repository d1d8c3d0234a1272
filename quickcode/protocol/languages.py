"""The bounded set of language ids the server records: LSP's known language identifiers (the specification's
table of `TextDocumentItem.languageId` values) and a few that editors send for common languages it lacks.
Anything else is `other`: a client-chosen string never becomes a metric label or any other unbounded key."""
from __future__ import annotations

LSP_LANGUAGE_IDS = frozenset("""
abap bat bibtex clojure coffeescript c cpp csharp css d delphi diff dart dockerfile elixir erlang fsharp
git-commit git-rebase go groovy handlebars haskell html ini java javascript javascriptreact json latex less
lua makefile markdown objective-c objective-cpp pascal perl perl6 php powershell jade pug python r razor ruby
rust scss sass scala shaderlab shellscript sql swift typescript typescriptreact tex vb xml xsl yaml
""".split())
# common ids editors send that the LSP table does not list (VS Code, Neovim's filetypes)
EXTRA_LANGUAGE_IDS = frozenset(
    "jsonc kotlin toml vue svelte zig julia ocaml nix terraform proto sh bash zsh".split())
KNOWN_LANGUAGE_IDS = LSP_LANGUAGE_IDS | EXTRA_LANGUAGE_IDS
OTHER = "other"


def language_label(language_id: str) -> str:
    """The id itself if known (case-insensitive), else `other`; empty stays `unknown` (the client did not
    say)."""
    if not language_id:
        return "unknown"
    lid = language_id.strip().lower()
    return lid if lid in KNOWN_LANGUAGE_IDS else OTHER
