"""Next-edit suggestions in a real headless Neovim 0.12 with the plugin of editors/neovim (`next_edit = true`), the
real language server and a real backend on the fake engine (its "model" rewrites the editable region it is shown,
`a + b` → `a * b`: the plugin is what is under test, and the embedded model was not tuned for edits). With the
cursor on the line below `a + b`, the plugin shows the edit on its target line (the `+` struck through, `→ *`
at that line's end: extmarks of the namespace `quickcode.next_edit`), a change drops it at once and the pause after
it asks again, an edit made stale by a change the plugin has not seen yet is refused, and Tab applies it; the file
written holds the edit and the typed keys only. With next edits off nothing is shown, no edit is asked and Tab is
a Tab; turned on live, the next key shows it.

Run alone: .venv/bin/python -m pytest tests/editors/test_neovim_next_edit.py -s
"""
from __future__ import annotations

import contextlib
import time

import pynvim
import pytest

from quickcode.backend.fake_engine import FakeEngine
from quickcode.backend.settings import Settings
from quickcode.benchmarks.neovim_driver import (PLUGIN, buffer_text, nvim_binary, open_and_connect, start_nvim,
                                                wait_until)
from tests.lsp_client.test_lsp_next_edit import edit_prompts, rewrite_region
from tests.support.editor_helpers import failure_context

pytestmark = [pytest.mark.editor, pytest.mark.neovim]

DOC = "def add(a, b):\n    total = a + b\n    return total\n"
# a deadline and a wait no machine misses (under load an edit past the server's default deadline is dropped,
# and nothing asks again until the next key): this test is about what the editor shows, not how fast
SHOW_TIMEOUT_S = 60.0

# the next edit's extmarks: the struck range {row, col, end_row, end_col} and the text at the end of a line
MARKS = """
  local q = require('quickcode')
  local out = { shown = q.shown_edit(0) ~= nil, struck = vim.NIL, preview = vim.NIL }
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(0, q._edit_ns, 0, -1, { details = true })) do
    local d = m[4]
    if d.hl_group == 'QuickcodeNextEditRemoved' then
      out.struck = { m[2], m[3], d.end_row, d.end_col }
    elseif d.virt_text then
      out.preview = { m[2], d.virt_text[1][1] }
    end
  end
  out.cursor_row = vim.api.nvim_win_get_cursor(0)[1] - 1
  return out
"""


@pytest.fixture
def engine():
    return FakeEngine(Settings(spec_method="off", heal_token=False), script=rewrite_region)


@contextlib.contextmanager
def nvim_on(tmp_path, ws_url: str, **options):
    """Neovim with calc.py open, its server connected, in insert mode at the end of `return total`."""
    lsp_log, path = tmp_path / "lsp.log", tmp_path / "calc.py"
    path.write_text(DOC)
    nvim = start_nvim(ws_url, lsp_log, "auto", settings={"predictor": False, "stateDir": "",
                                                        "deadlineMs": SHOW_TIMEOUT_S * 1000}, **options)
    try:
        open_and_connect(nvim, path)
        nvim.command("normal! G$")
        nvim.input("A")                                # InsertEnter: the plugin asks
        assert wait_until(lambda: nvim.api.get_mode()["mode"] == "i", 5)
        yield nvim, path, lsp_log
    finally:
        nvim.exec_lua("for _, c in ipairs(vim.lsp.get_clients()) do c:stop(true) end")
        nvim.close()


def marks(nvim) -> dict:
    return nvim.exec_lua(MARKS)


def test_neovim_shows_a_next_edit_on_its_line_and_tab_applies_it(tmp_path, fake_backend, engine):
    b = fake_backend(engine)
    with nvim_on(tmp_path, b.ws_url, next_edit=True) as (nvim, path, lsp_log):
        shown = wait_until(lambda: (lambda m: m if m["shown"] else None)(marks(nvim)), SHOW_TIMEOUT_S)
        assert shown, "no next edit shown\n" + failure_context(lsp_log, b)
        print("[neovim next edit] shown:", shown)
        assert shown["struck"] == [1, 14, 1, 15] and shown["preview"] == [1, "→ *"], shown
        assert shown["cursor_row"] == 2                    # away from the cursor's line

        # a key typed (the change, then its event, in one call: no answer can come between) drops it at once
        got = nvim.exec_lua("""
          local row, col = unpack(vim.api.nvim_win_get_cursor(0))
          vim.api.nvim_buf_set_text(0, row - 1, col, row - 1, col, { 'x' })
          vim.api.nvim_win_set_cursor(0, { row, col + 1 })
          vim.api.nvim_exec_autocmds('TextChangedI', { buffer = 0, modeline = false })
          return #vim.api.nvim_buf_get_extmarks(0, require('quickcode')._edit_ns, 0, -1, {})
        """)
        assert got == 0
        assert wait_until(lambda: marks(nvim)["shown"], SHOW_TIMEOUT_S), "not asked again after the change"

        # a change the plugin has not seen yet (no event between): the edit shown is stale and refused
        stale = nvim.exec_lua("""
          local before = vim.api.nvim_buf_get_lines(0, 0, -1, false)
          vim.api.nvim_buf_set_text(0, 0, 0, 0, 0, { '#' })
          local took = require('quickcode').accept_edit(0)
          vim.api.nvim_buf_set_lines(0, 0, -1, false, before)
          return took
        """)
        assert stale is False
        assert wait_until(lambda: marks(nvim)["shown"], SHOW_TIMEOUT_S), "not asked again after the change"

        nvim.input("<Tab>")                                # applies it, a line above the cursor
        expected = DOC.replace("a + b", "a * b").rstrip("\n") + "x"
        assert wait_until(lambda: buffer_text(nvim) == expected, 5), (buffer_text(nvim), expected)
        nvim.input("<Esc>")
        nvim.command("write")
        assert path.read_text() == expected + "\n"
        stats = nvim.exec_lua("return (require('quickcode').exec('quickcode.stats'))")
        assert stats["next_edits"]["answered"] >= 3, stats["next_edits"]


def test_neovim_with_next_edits_off_shows_none_and_tab_is_a_tab(tmp_path, fake_backend, engine):
    b = fake_backend(engine)
    with nvim_on(tmp_path, b.ws_url) as (nvim, path, lsp_log):
        nvim.input("x")
        assert wait_until(lambda: buffer_text(nvim) == DOC.rstrip("\n") + "x", 5)
        time.sleep(1.0)                                    # time for a wrong edit to show (on, it shows: below)
        assert not marks(nvim)["shown"] and edit_prompts(engine) == 0
        assert nvim.exec_lua("return (require('quickcode').exec('quickcode.stats'))")["next_edits"]["asked"] == 0
        nvim.input("<Tab>")
        assert wait_until(lambda: buffer_text(nvim) != DOC.rstrip("\n") + "x", 5)
        tab_itself = buffer_text(nvim)[len(DOC.rstrip("\n") + "x"):]
        assert tab_itself.strip() == "" and 1 <= len(tab_itself) <= 8, tab_itself     # a Tab (python: spaces)
        nvim.exec_lua("require('quickcode').set_next_edit(true)")     # turned on live: shown after the next key
        nvim.input("y")
        assert wait_until(lambda: marks(nvim)["shown"], SHOW_TIMEOUT_S), "not shown once turned on"


def test_neovim_takes_only_a_well_formed_edit_for_the_buffer_and_version(tmp_path):
    """The plugin's check of a copilotInlineEdit answer (`_edit_of`, the answer is input), in a real Neovim: the
    edit placed in bytes (UTF-16 columns of the line `é = a + b` converted), and nothing for another document,
    another version, a range the buffer does not have, a reversed range, a non-integer position, a text that is
    not a string or too long, or an edit that changes nothing."""
    nvim = pynvim.attach("child", argv=[nvim_binary(), "--embed", "--headless", "--clean", "-n"])
    try:
        nvim.exec_lua("vim.opt.runtimepath:prepend(...)", str(PLUGIN))
        got = nvim.exec_lua("""
          local q = require('quickcode')
          vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'def f():', '    é = a + b' })
          local uri = 'file:///x.py'
          local function edit(over)
            return vim.tbl_extend('force', { text = '*', textDocument = { uri = uri, version = 4 },
              range = { start = { line = 1, character = 10 }, ['end'] = { line = 1, character = 11 } },
              command = { title = '', command = 'quickcode.accept' } }, over or {})
          end
          local function of(e) return q._edit_of({ edits = { e } }, 0, uri, 4, 'utf-16') or false end
          local function R(l0, c0, l1, c1)
            return { start = { line = l0, character = c0 }, ['end'] = { line = l1, character = c1 } }
          end
          return {
            good = of(edit()),
            other_doc = of(edit({ textDocument = { uri = 'file:///y.py', version = 4 } })),
            other_version = of(edit({ textDocument = { uri = uri, version = 3 } })),
            no_line = of(edit({ range = R(5, 0, 5, 1) })),
            past_line_end = of(edit({ range = R(1, 10, 1, 40) })),
            reversed = of(edit({ range = R(1, 11, 1, 10) })),
            fraction = of(edit({ range = R(1, 10.5, 1, 11) })),
            not_text = of(edit({ text = 7 })),
            too_long = of(edit({ text = ('x'):rep(20001) })),
            unchanged = of(edit({ text = '+' })),
            not_a_list = q._edit_of({ edits = 'x' }, 0, uri, 4, 'utf-16') or false,
            none = q._edit_of(vim.NIL, 0, uri, 4, 'utf-16') or false,
          }
        """)
        assert got["good"] == {"row": 1, "col": 11, "end_row": 1, "end_col": 12, "old": "+", "text": "*",
                               "version": 4, "command": {"title": "", "command": "quickcode.accept"}}, got["good"]
        assert [k for k, v in got.items() if k != "good" and v is not False] == []
    finally:
        nvim.close()
