"""quickcode's language server (pygls 2.x, stdio): `quickcode lsp`.

Read in the order of a keystroke:
  stdio.py      the transport: stdin read by the event loop, each completion request's cursor noted as it is read
  server.py     LSP handlers only (document sync, inline completion + completion fallback, commands)
  session.py    the open documents and the keystroke path: `complete()` is the flow
                (context → cache → in-flight reuse → document word / skip → debounce → launch → wait → answer),
                `suggest()` the never-stale sequence around it (fresh.py)
  docwords.py   mid-word: the rest of the word from the document's own identifiers, nothing asked
  documents.py  its records: an open document, one request being decided, an answer
  context.py    document + cursor → the prefix/suffix windows of the prompt (bounded on any line length)
  cache.py      typed-through hits: a suggestion the user types into costs no request
  inflight.py   running requests per document (`Flight`, ending exactly once), reuse or cancel
  places.py     the kind of place before the cursor (debounce, pause points, predictor all read it)
  debounce.py   how long to wait after a keystroke, learnt per kind of place
  predictor.py  skip places whose suggestion would likely be dismissed
  pump.py       backend stream → flight; the only waiting; stop or cancel what nobody needs
  postprocess.py  raw model text → what the editor shows (its next word, or the line or block)
  fresh.py      never stale: an answer as it applies to the document when it is sent
  answer.py     a suggestion → LSP items
Next edits (off by default, setting `next_edit`): edits.py (each document's recent edits as whole-line hunks,
bounded), next_edit.py (the asking: the region around the cursor and the history as one `edit`, cancelled on
typing, the answer never stale; region and request shaped by protocol/edit_window.py), edit_region.py (the
answer placed in the document), edit_handlers.py (`textDocument/copilotInlineEdit`, and a ranged inline
completion where none).
Beside the path: warmup.py (requests asked ahead), accounting.py (stats, waste, waterfall), telemetry.py
(outcomes of shown suggestions), state.py + statefile.py (what is learnt, kept across sessions, 0600),
snippets.py (neighbouring files), channel.py + stream.py (one WebSocket to the backend), endpoints.py (probing
every endpoint, and the nearest healthy one), refusal.py (a wrong token or an incompatible server: said once),
config.py (settings), clock.py (all time: real in the editor, virtual in tests), report.py (latency report),
cli.py (`quickcode lsp`); and doctor.py + doctor_checks.py (`quickcode doctor`: checks the way to a backend
from the command line; the steps, then the pure parts).
lsp_client imports quickcode/protocol/ and nothing else of the project.
"""
