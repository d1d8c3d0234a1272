--- quickcode for Neovim: runs the quickcode language server (`quickcode lsp`, stdio) and shows its
--- suggestions as ghost text with Neovim's own LSP inline completion (0.12+), or as one item of the
--- completion menu on 0.11 (vim.lsp.completion) and 0.10 (omnifunc).
---
---   require('quickcode').setup({ endpoints = { 'ws://127.0.0.1:8765/v1/ws' } })
---
--- Accepting runs the item's `quickcode.accept` command (the acceptance telemetry): on 0.12
--- `vim.lsp.inline_completion.get()` executes `item.command` itself after inserting the text, and so does
--- `vim.lsp.completion` on CompleteDone, so this plugin never runs it a second time. Partial accepts
--- (word / line) insert part of the text and send `textDocument/didPartiallyAcceptCompletion`.
---
--- Next edits (`next_edit = true`, off by default): the edit the server proposes near the cursor, also away
--- from it (`textDocument/copilotInlineEdit`), shown on its target line; Tab applies it while it is shown.
local M = {}

local NAME = 'quickcode'
local augroup = vim.api.nvim_create_augroup('quickcode', { clear = true })
local buf_augroup = vim.api.nvim_create_augroup('quickcode.buffer', { clear = true })
local STATUS_NOTIFICATION = '$/quickcode/status'
--- the ghost text shown was the settled part of a line still being written; the rest is in: ask again
local MORE_NOTIFICATION = '$/quickcode/moreText'
local TRIGGER = vim.lsp.protocol.InlineCompletionTriggerKind or { Invoked = 1, Automatic = 2 }
local AUTOMATIC = TRIGGER.Automatic

---@class quickcode.Config
local defaults = {
  --- Command that starts the server; nil = `quickcode lsp` ($QUICKCODE_CMD overrides, split on spaces).
  cmd = nil, ---@type string[]?
  --- Backend WebSocket URLs; nil = the server's environment (QUICKCODE_ENDPOINTS) or its default.
  endpoints = nil, ---@type string[]?
  --- API token; nil = QUICKCODE_TOKEN from the environment.
  token = nil, ---@type string?
  --- Any other setting of the server (quickcode/lsp_client/config.py, camelCase or snake_case):
  --- enabled, languages = { python = true, markdown = false, ['*'] = true }, debounceMs, maxTokens, ...
  settings = {},
  --- Filetypes to attach to; nil = every buffer that is a file (the server's `languages` decides).
  filetypes = nil, ---@type string[]?
  root_markers = { '.git' },
  --- 'auto': inline completion on 0.12+, the completion menu before; 'inline' or 'completion' to force.
  mode = 'auto',
  --- When the inline mode asks: 'keystroke' (after every change, on entering insert mode and after a cursor
  --- move in it, as VS Code does: the server debounces, serves from its cache and answers for the text as it is
  --- when the answer is sent) or 'pause' (Neovim's own timer: 200 ms after the last key, not configurable).
  --- 'keystroke' needs Neovim's inline-completion internals (`vim.lsp._capability`, 0.12); where they differ it
  --- falls back to 'pause'.
  ask = 'keystroke',
  --- Server log file (one waterfall line per backend request); nil = $QUICKCODE_LSP_LOG or stderr.
  log_file = nil, ---@type string?
  --- Next-edit suggestions (the server's `nextEdit`): in insert mode, after a change or a cursor move, the
  --- edit the server proposes near the cursor (possibly on another line) is shown on its target line (the text
  --- it replaces struck through, the new text after the line); the accept key applies it while it is shown
  --- (after any ghost text), any other change drops it. Also `settings = { nextEdit = true }`; live:
  --- :QuickcodeNextEdit on|off|toggle.
  next_edit = false,
  --- Insert-mode keys, buffer-local where the server is attached; false disables one.
  --- accept / accept_alt fall back to the key's own meaning when no suggestion is shown.
  keymaps = {
    accept = '<Tab>',
    accept_alt = '<C-y>',
    accept_word = '<M-Right>',
    accept_line = '<M-Down>',
    next = '<M-]>',
    prev = '<M-[>',
    dismiss = '<C-]>',
    trigger = '<M-\\>', -- ask now (inline) / open the menu (completion mode)
  },
}

M.config = vim.deepcopy(defaults)
--- Last `$/quickcode/status` (connection state, endpoint, recent_first_chunk_ms_p50, acceptance_rate, enabled).
M.status = nil ---@type table?

local function has_inline()
  return vim.lsp.inline_completion ~= nil and vim.fn.has('nvim-0.12') == 1
end

--- 'inline' | 'completion' | 'omnifunc': how suggestions are shown in this Neovim.
function M.mode()
  local mode = M.config.mode
  if mode == 'inline' and has_inline() then return 'inline' end
  if mode == 'completion' or (mode == 'auto' and not has_inline()) then
    return vim.lsp.completion and 'completion' or 'omnifunc'
  end
  return has_inline() and 'inline' or (vim.lsp.completion and 'completion' or 'omnifunc')
end

--- The server settings: `settings` plus endpoints/token when given (never empty values, so the
--- server's environment stays in force).
function M.server_settings()
  local s = vim.deepcopy(M.config.settings or {})
  if M.config.endpoints and #M.config.endpoints > 0 then s.endpoints = M.config.endpoints end
  if M.config.token and M.config.token ~= '' then s.token = M.config.token end
  if M.config.next_edit == true then s.nextEdit = true end
  return s
end

local function server_cmd()
  if M.config.cmd then return M.config.cmd end
  if vim.env.QUICKCODE_CMD and vim.env.QUICKCODE_CMD ~= '' then
    return vim.split(vim.env.QUICKCODE_CMD, ' ', { trimempty = true })
  end
  return { 'quickcode', 'lsp' }
end

M._server_cmd = server_cmd   -- for :checkhealth quickcode (health.lua)

--- The quickcode client attached to {bufnr} (or any quickcode client).
function M.client(bufnr)
  return vim.lsp.get_clients({ name = NAME, bufnr = bufnr })[1]
end

local function lsp_config()
  local cmd_env = nil
  if M.config.log_file then cmd_env = { QUICKCODE_LSP_LOG = M.config.log_file } end
  local markers = M.config.root_markers or { '.git' }
  return {
    name = NAME,
    cmd = server_cmd(),
    cmd_env = cmd_env,
    filetypes = M.config.filetypes,
    -- only buffers backed by a file (not [No Name]); the root is informative (no workspace-wide work)
    root_dir = function(bufnr, on_dir)
      local file = vim.api.nvim_buf_get_name(bufnr)
      if file == '' then return end
      on_dir(vim.fs.root(bufnr, markers) or vim.fs.dirname(file))
    end,
    -- one server (one WebSocket to the backend) per Neovim, whatever the project roots
    reuse_client = function(client, config) return client.name == config.name end,
    init_options = M.server_settings(),
    -- sent as workspace/didChangeConfiguration after `initialized`; the server reads the `quickcode` section
    settings = { quickcode = M.server_settings() },
    handlers = {
      [STATUS_NOTIFICATION] = function(_, result)
        M.status = result
        vim.api.nvim_exec_autocmds('User', { pattern = 'QuickcodeStatus', modeline = false, data = result })
      end,
      [MORE_NOTIFICATION] = function(_, result)
        vim.schedule(function() M._more_text(result) end)
      end,
    },
  }
end

--- Neovim's inline-completion class (a private part of Neovim 0.12), nil where it is not where the plugin looks.
local function inline_state()
  local capability = vim.tbl_get(vim.lsp, '_capability', 'all', 'inline_completion')
  if type(capability) == 'table' and type(capability.active) == 'table' and type(capability.request) == 'function' then
    return capability
  end
end

--- Whether this Neovim's inline-completion state is reachable (ask = 'keystroke'; :checkhealth).
function M.can_ask_now()
  return inline_state() ~= nil
end

--- Neovim's inline-completion state of {bufnr} (0 = the current buffer), nil where it is not reachable.
local function completor_of(bufnr)
  if not bufnr or bufnr == 0 then bufnr = vim.api.nvim_get_current_buf() end
  local capability = inline_state()
  local completor = capability and capability.active[bufnr]
  if completor and not completor._quickcode_show then M._guard_show(completor, bufnr) end
  return completor
end

--- Ask the server for inline completions at the cursor now, through Neovim's own inline-completion state for
--- {bufnr} (its rendering, accept and select stay Neovim's); false where that state is not reachable.
local function ask_now(bufnr, kind)
  local completor = completor_of(bufnr)
  if not completor then return false end
  completor:request(kind or AUTOMATIC)
  return true
end

M._ask_now = ask_now

local function buffer_text_of(bufnr)
  return function(r0, c0, r1, c1)
    local ok, lines = pcall(vim.api.nvim_buf_get_text, bufnr, r0, c0, r1, c1, {})
    return ok and lines or nil      -- a range the buffer no longer has (text deleted since)
  end
end

--- Drop the item {completor} shows if it no longer fits the buffer at the cursor (`M._placement`: the cursor
--- left before it, or text typed since that contradicts it); true when it did.
local function drop_if_contradicted(completor, bufnr)
  local item, win = completor.current, vim.api.nvim_get_current_win()
  if not item or vim.api.nvim_win_get_buf(win) ~= bufnr then return false end
  local c = vim.api.nvim_win_get_cursor(win)
  if M._placement(item, c[1] - 1, c[2], buffer_text_of(bufnr)) then return false end
  completor.current = nil
  if type(completor.hide) == 'function' then completor:hide() end
  return true
end

--- Neovim 0.12 re-shows its item on every cursor move in insert mode (its CursorMovedI handler, before any
--- change event) at the item's range as it was asked: after <BS> past the start of that range at the end of
--- a line the range is past the line's end, and its `show` fails ("Invalid 'col': out of range") — an error
--- message in the editor, and a 1 s freeze, as Neovim waits after an error message in insert mode (found by
--- `quickcode bench neovim`: the same pause, 840 ms, in every run). Here its `show` first drops an item that
--- no longer fits the buffer.
function M._guard_show(completor, bufnr)
  local show = completor.show
  if type(show) ~= 'function' then return end
  completor._quickcode_show = show
  completor.show = function(self, ...)
    if not drop_if_contradicted(self, bufnr) then return show(self, ...) end
  end
end

-- the buffer's changedtick at the plugin's last ask, per buffer: a CursorMovedI at the same tick is a move
-- without a change (arrows, a click), which Neovim's own state asks for only after its 200 ms
local asked_tick = {}

local function ask_if_keystroke(completor, bufnr)
  if M.config.ask ~= 'keystroke' then return end
  asked_tick[bufnr] = vim.api.nvim_buf_get_changedtick(bufnr)
  completor:request(AUTOMATIC)
end

--- A change in insert mode in {bufnr}: the item shown goes if the text typed since contradicts it (Neovim
--- would keep showing it, shifted by the keys, until an answer replaces it, and Tab would take it); then, with
--- ask = 'keystroke', a request now.
local function on_change(bufnr)
  local completor = completor_of(bufnr)
  if not completor then return end
  drop_if_contradicted(completor, bufnr)
  ask_if_keystroke(completor, bufnr)
end

--- Entering insert mode, or the cursor moved in it without a change: with ask = 'keystroke', a request now
--- rather than Neovim's 200 ms later (`quickcode bench neovim`: the first pause of every session, in insert
--- mode at once, showed ghost text after 234–279 ms, all the others p90 34 ms). A typed key moves the cursor
--- too: its CursorMovedI comes before its TextChangedI, at a new changedtick, and is left to on_change.
--- Runs scheduled: at InsertEnter the cursor has not taken its insert position yet (`A`, `o`).
local function on_enter_or_move(bufnr, event)
  if event == 'CursorMovedI' and asked_tick[bufnr] ~= vim.api.nvim_buf_get_changedtick(bufnr) then return end
  vim.schedule(function()
    local completor = completor_of(bufnr)
    if completor and vim.api.nvim_get_mode().mode:sub(1, 1) == 'i' then ask_if_keystroke(completor, bufnr) end
  end)
end

M._on_change = on_change

-- ── accepting ───────────────────────────────────────────────────────────────────────────────────────

local function feed(keys)
  return vim.api.nvim_replace_termcodes(keys, true, false, true)
end

local function text_of(item)
  local t = item.insert_text
  return type(t) == 'string' and t or (t and t.value) or ''
end

--- Where {item} goes in the buffer as it is now: (row, col, end_row, end_col, rest) — the region to replace
--- and the text of the item not typed yet — or nil when the buffer contradicts the item.
--- Neovim 0.12 keeps showing an item while the user types (the text after the typed part) until its next
--- request is answered (by itself 200 ms after the last key); its own accept then replaces the item's range as
--- it was asked, before those keys, and the typed characters came out twice (`print(f"` + Tab → `print(f"f`).
--- Here the characters typed since the item's range began must be the start of its text: they are kept,
--- and only the rest is inserted at the cursor; anything else typed there and the item no longer applies.
function M._placement(item, cursor_row, cursor_col, get_text)
  local text = text_of(item)
  if not item.range then return cursor_row, cursor_col, cursor_row, cursor_col, text end
  local s, e = item.range.start, item.range.end_
  if cursor_row < s.row or (cursor_row == s.row and cursor_col < s.col) then return nil end   -- left before it
  local after_end = cursor_row > e.row or (cursor_row == e.row and cursor_col >= e.col)
  if not after_end then return s.row, s.col, e.row, e.col, text end   -- the range as asked: Neovim's own way
  local lines = get_text(s.row, s.col, cursor_row, cursor_col)
  local typed = lines and table.concat(lines, '\n')
  if not typed or text:sub(1, #typed) ~= typed then return nil end
  return cursor_row, cursor_col, cursor_row, cursor_col, text:sub(#typed + 1)
end

--- The buffer after {item} (or {part}, a prefix of what is left of it) is placed, the cursor after it;
--- false when the buffer contradicts the item (nothing changed).
local function place(buf, win, item, part_of)
  local c = vim.api.nvim_win_get_cursor(win)
  local row, col, erow, ecol, rest = M._placement(item, c[1] - 1, c[2], buffer_text_of(buf))
  if not row then return false end
  local part = part_of and part_of(rest) or rest
  if part == '' then return false end
  local lines = vim.split(part, '\n', { plain = true })
  if #part < #rest then erow, ecol = row, col end   -- a partial accept inserts; the range is for the whole
  vim.api.nvim_buf_set_text(buf, row, col, erow, ecol, lines)
  vim.api.nvim_win_set_cursor(win, { row + #lines, (#lines == 1 and col or 0) + #lines[#lines] })
  return part, rest
end

--- Accept the whole suggestion. Returns true when one was shown (and is being inserted).
function M.accept(bufnr)
  bufnr = bufnr or 0
  local mode = M.mode()
  if mode == 'inline' then
    return vim.lsp.inline_completion.get({
      bufnr = bufnr,
      on_accept = function(item)
        local buf = vim.api.nvim_get_current_buf()
        if not place(buf, vim.api.nvim_get_current_win(), item) then
          return M.trigger(AUTOMATIC)   -- the text typed since contradicts it: ask for what fits the text now
        end
        local client = vim.lsp.get_client_by_id(item.client_id)
        if client and item.command then client:exec_cmd(item.command, { bufnr = buf }) end
      end,
    })
  end
  local info = vim.fn.complete_info({ 'mode', 'selected', 'items' })
  if info.mode ~= '' and #info.items > 0 then
    -- the menu's own accept: CompleteDone runs the item's command (and `complete_done` below the rest)
    local keys = info.selected == -1 and '<C-n><C-y>' or '<C-y>'
    vim.api.nvim_feedkeys(feed(keys), 'n', false)
    return true
  end
  return false
end

-- ── the completion-menu path (0.11) ─────────────────────────────────────────────────────────────────
-- vim.lsp.completion inserts only a plain-text item's first run of non-blanks (`newText:match('^%S*')`):
-- our item's word is its whole first line instead, and on CompleteDone the following lines are added.

local function is_ours(item)
  return type(item) == 'table' and item.detail == 'quickcode' and type(item.textEdit) == 'table'
end

--- `convert` for vim.lsp.completion.enable: the menu word is the suggestion's whole first line.
function M._convert(item)
  if not is_ours(item) then return {} end
  return { word = item.textEdit.newText:match('^[^\n]*') }
end

local function complete_done(bufnr)
  local done = vim.v.completed_item
  local lsp = vim.tbl_get(done or {}, 'user_data', 'nvim', 'lsp') or {}
  local item, client = lsp.completion_item, lsp.client_id and vim.lsp.get_client_by_id(lsp.client_id)
  if not client or client.name ~= NAME or not is_ours(item) then return end
  local text = item.textEdit.newText
  local first = text:match('^[^\n]*')
  if #text == #first or done.word ~= first then return end
  local rest = vim.split(text:sub(#first + 1), '\n', { plain = true }) -- { '', line2, ... }
  vim.schedule(function()
    if not vim.api.nvim_buf_is_valid(bufnr) or vim.api.nvim_get_current_buf() ~= bufnr then return end
    local win = vim.api.nvim_get_current_win()
    local row, col = unpack(vim.api.nvim_win_get_cursor(win))
    vim.api.nvim_buf_set_text(bufnr, row - 1, col, row - 1, col, rest)
    vim.api.nvim_win_set_cursor(win, { row + #rest - 1, #rest[#rest] })
  end)
end

--- The prefix of {text} to accept: the next word (with the whitespace before it) or the rest of the line.
function M._partial(text, what)
  if what == 'line' then
    local nl = text:find('\n', 1, true)
    if nl == 1 then
      -- at a line end: take the newline and the next line's indentation + text
      local rest = text:sub(2)
      local nl2 = rest:find('\n', 1, true)
      return '\n' .. (nl2 and rest:sub(1, nl2 - 1) or rest)
    end
    return nl and text:sub(1, nl - 1) or text
  end
  local s = text:match('^%s*[%w_]+') or text:match('^%s*[^%w_%s]+') or text:match('^%s+') or text
  return s
end

--- Accept part of the inline suggestion ('word' or 'line'), report it, and let Neovim ask again for the rest.
function M.accept_partial(what, bufnr)
  bufnr = bufnr or 0
  if M.mode() ~= 'inline' then return false end
  return vim.lsp.inline_completion.get({
    bufnr = bufnr,
    on_accept = function(item)
      local buf = vim.api.nvim_get_current_buf()
      local part, rest = place(buf, vim.api.nvim_get_current_win(), item,
        function(left) return M._partial(left, what) end)
      if not part then return M.trigger(AUTOMATIC) end
      local text = text_of(item)
      part = text:sub(1, #text - #rest + #part)     -- accepted of the item: what was typed of it, then part
      local client = vim.lsp.get_client_by_id(item.client_id)
      if client then
        if #part >= #text and item.command then
          client:exec_cmd(item.command, { bufnr = buf }) -- all of it after all: a full accept
        else
          local lsp_item = { insertText = item.insert_text, command = item.command }
          if item.range and item.range.to_lsp then lsp_item.range = item.range:to_lsp(client.offset_encoding) end
          client:notify('textDocument/didPartiallyAcceptCompletion', { item = lsp_item, acceptedLength = #part })
        end
      end
    end,
  })
end

function M.next(count)
  if M.mode() == 'inline' then vim.lsp.inline_completion.select({ count = count or 1 }) end
end

function M.dismiss(bufnr)
  if M.mode() ~= 'inline' then return end
  -- re-enabling clears the shown item; the next keystroke asks again
  local b = vim.api.nvim_get_current_buf()
  if bufnr and bufnr ~= 0 then b = bufnr end
  vim.lsp.inline_completion.enable(false, { bufnr = b })
  vim.lsp.inline_completion.enable(true, { bufnr = b })
end

--- `$/quickcode/moreText`: ask again if the cursor is still where that ghost text was shown (insert mode).
function M._more_text(params)
  if M.mode() ~= 'inline' or not params or not params.position or not params.textDocument then return end
  if not vim.api.nvim_get_mode().mode:match('^i') then return end
  if vim.uri_from_bufnr(0) ~= params.textDocument.uri then return end
  local client = vim.lsp.get_clients({ name = NAME, bufnr = 0 })[1]
  if not client then return end
  local here = vim.lsp.util.make_position_params(0, client.offset_encoding).position
  if here.line == params.position.line and here.character == params.position.character then M.trigger(AUTOMATIC) end
end

--- Ask now: inline (by default as the user's own request: an invoked trigger) or open the completion menu.
function M.trigger(kind)
  local mode = M.mode()
  if mode == 'inline' then
    -- a request now; else (other internals) Neovim's automatic one, 200 ms after a cursor event
    if not ask_now(0, kind or TRIGGER.Invoked) then
      vim.api.nvim_exec_autocmds('CursorMovedI', { buffer = 0, modeline = false })
    end
  elseif mode == 'completion' then
    vim.lsp.completion.get()
  else
    vim.api.nvim_feedkeys(feed('<C-x><C-o>'), 'n', false)
  end
end

local function map_keys(bufnr)
  local k = M.config.keymaps or {}
  local function imap(lhs, rhs, desc, expr)
    if lhs and lhs ~= false and lhs ~= '' then
      vim.keymap.set('i', lhs, rhs, { buffer = bufnr, expr = expr, silent = true, desc = 'quickcode: ' .. desc })
    end
  end
  -- accept, or the key's own meaning when nothing is shown
  imap(k.accept, function()
    if M.accept(bufnr) or M.accept_edit(bufnr) then return '' end
    return feed(k.accept)
  end, 'accept suggestion', true)
  imap(k.accept_alt, function()
    if M.accept(bufnr) then return '' end
    return feed(k.accept_alt)
  end, 'accept suggestion', true)
  imap(k.accept_word, function() M.accept_partial('word', bufnr) end, 'accept next word')
  imap(k.accept_line, function() M.accept_partial('line', bufnr) end, 'accept next line')
  imap(k.next, function() M.next(1) end, 'next suggestion')
  imap(k.prev, function() M.next(-1) end, 'previous suggestion')
  imap(k.dismiss, function() M.dismiss(bufnr) end, 'dismiss suggestion')
  imap(k.trigger, M.trigger, 'suggest now')
end

-- ── next edits (textDocument/copilotInlineEdit) ─────────────────────────────────────────────────────
-- After a change or a cursor move in insert mode the plugin asks the server for the next edit (the server
-- waits for the pause itself, and answers nothing if the document changed meanwhile); a newer ask cancels the
-- older. The edit is shown with extmarks of the namespace `quickcode.next_edit`: its range struck through
-- (QuickcodeNextEditRemoved) and `→ new text` at the end of its line (QuickcodeNextEditAdded). Any change of
-- the buffer, leaving insert mode or the buffer drops it.

local INLINE_EDIT = 'textDocument/copilotInlineEdit'
local edit_ns = vim.api.nvim_create_namespace('quickcode.next_edit')
local edit_augroup = vim.api.nvim_create_augroup('quickcode.next_edit', { clear = true })
local MAX_EDIT_CHARS = 20000       -- an answer larger than this is not shown (a broken or hostile server)
M._edit_ns = edit_ns

--- bufnr → the edit shown { row, col, end_row, end_col (bytes), old, text, version, command, client_id }
local shown_edits = {}
--- bufnr → { client, id } of the ask in flight
local edit_asks = {}
local edit_ask_scheduled = {}

vim.api.nvim_set_hl(0, 'QuickcodeNextEditRemoved', { default = true, strikethrough = true })
vim.api.nvim_set_hl(0, 'QuickcodeNextEditAdded', { default = true, link = 'DiffAdd' })

--- Whether next edits are asked for: `next_edit` (or the server setting `nextEdit`) on, completions enabled.
function M.next_edit_on()
  local s = M.server_settings()
  return (s.nextEdit == true or s.next_edit == true) and s.enabled ~= false
end

local function buf_version(bufnr)
  return vim.lsp.util.buf_versions[bufnr]
end

local function cancel_edit_ask(bufnr)
  local ask = edit_asks[bufnr]
  edit_asks[bufnr] = nil
  if ask and ask.client and not ask.client:is_stopped() then pcall(ask.client.cancel_request, ask.client, ask.id) end
end

--- Drop the next edit shown in {bufnr} (and the ask in flight).
function M.clear_edit(bufnr)
  if not bufnr or bufnr == 0 then bufnr = vim.api.nvim_get_current_buf() end
  cancel_edit_ask(bufnr)
  shown_edits[bufnr] = nil
  if vim.api.nvim_buf_is_valid(bufnr) then vim.api.nvim_buf_clear_namespace(bufnr, edit_ns, 0, -1) end
end

--- The edit shown in {bufnr}, nil when none (for tests and statuslines).
function M.shown_edit(bufnr)
  if not bufnr or bufnr == 0 then bufnr = vim.api.nvim_get_current_buf() end
  return shown_edits[bufnr]
end

local function is_pos(p)
  return type(p) == 'table' and type(p.line) == 'number' and p.line >= 0 and p.line == math.floor(p.line)
    and type(p.character) == 'number' and p.character >= 0 and p.character == math.floor(p.character)
end

--- An LSP position of {bufnr} as (row, byte col), nil when the buffer has no such place.
local function byte_pos(bufnr, pos, encoding)
  local line = vim.api.nvim_buf_get_lines(bufnr, pos.line, pos.line + 1, false)[1]
  if not line then return nil end
  local ok_len, len = pcall(vim.str_utfindex, line, encoding)
  if not ok_len or pos.character > len then return nil end      -- past the line's end: not this text
  local ok, col = pcall(vim.str_byteindex, line, encoding, pos.character, false)
  if not ok or not col then return nil end
  return pos.line, col
end

--- The edit of a copilotInlineEdit answer {result} for {bufnr} at {version}, placed in the buffer; nil when
--- there is none, it is malformed (every field is checked: the answer is input), or not for this version.
function M._edit_of(result, bufnr, uri, version, encoding)
  local edits = type(result) == 'table' and result.edits
  if type(edits) ~= 'table' then return nil end
  for _, e in ipairs(edits) do
    local doc, range = type(e) == 'table' and e.textDocument, type(e) == 'table' and e.range
    if type(e.text) == 'string' and #e.text <= MAX_EDIT_CHARS and type(range) == 'table' and is_pos(range.start)
        and is_pos(range['end']) and type(doc) == 'table' and doc.uri == uri and doc.version == version then
      local row, col = byte_pos(bufnr, range.start, encoding)
      local end_row, end_col = byte_pos(bufnr, range['end'], encoding)
      if row and end_row and (end_row > row or (end_row == row and end_col >= col)) then
        local old = table.concat(vim.api.nvim_buf_get_text(bufnr, row, col, end_row, end_col, {}), '\n')
        if old ~= e.text then
          local command = type(e.command) == 'table' and type(e.command.command) == 'string' and e.command or nil
          return { row = row, col = col, end_row = end_row, end_col = end_col, old = old, text = e.text,
                   version = version, command = command }
        end
      end
    end
  end
end

local function show_edit(bufnr, edit)
  M.clear_edit(bufnr)
  shown_edits[bufnr] = edit
  if edit.end_row > edit.row or edit.end_col > edit.col then
    vim.api.nvim_buf_set_extmark(bufnr, edit_ns, edit.row, edit.col, {
      end_row = edit.end_row, end_col = edit.end_col, hl_group = 'QuickcodeNextEditRemoved', priority = 200 })
  end
  local lines = vim.split(edit.text, '\n', { plain = true })
  local first = table.remove(lines, 1)
  local virt_lines = {}
  for _, l in ipairs(lines) do table.insert(virt_lines, { { '  ' .. l, 'QuickcodeNextEditAdded' } }) end
  vim.api.nvim_buf_set_extmark(bufnr, edit_ns, edit.end_row, 0, {
    virt_text = { { '→ ' .. (edit.text == '' and '(delete)' or first), 'QuickcodeNextEditAdded' } },
    virt_text_pos = 'eol', virt_lines = #virt_lines > 0 and virt_lines or nil, priority = 200 })
end

--- Ask the server for the next edit at the cursor of {bufnr} (insert mode, next edits on); the answer is shown
--- if the buffer is still at the version asked.
function M.ask_edit(bufnr)
  if not bufnr or bufnr == 0 then bufnr = vim.api.nvim_get_current_buf() end
  cancel_edit_ask(bufnr)
  local client = M.client(bufnr)
  if not client or not M.next_edit_on() or vim.api.nvim_get_current_buf() ~= bufnr
      or not vim.api.nvim_get_mode().mode:match('^i') then
    return false
  end
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  local version = buf_version(bufnr)
  params.textDocument.version = version
  local uri = params.textDocument.uri
  local ok, id
  ok, id = client:request(INLINE_EDIT, params, function(err, result)
    if edit_asks[bufnr] == nil or edit_asks[bufnr].id ~= id then return end     -- a newer ask replaced it
    edit_asks[bufnr] = nil
    if err or not vim.api.nvim_buf_is_valid(bufnr) or buf_version(bufnr) ~= version then return end
    local edit = M._edit_of(result, bufnr, uri, version, client.offset_encoding)
    if not edit then return M.clear_edit(bufnr) end
    edit.client_id = client.id
    show_edit(bufnr, edit)
  end, bufnr)
  if ok then edit_asks[bufnr] = { client = client, id = id } end
  return ok
end

--- Ask once the events of this key are in (a change and its cursor move: one ask).
local function ask_edit_soon(bufnr)
  if edit_ask_scheduled[bufnr] or not M.next_edit_on() then return end
  edit_ask_scheduled[bufnr] = true
  vim.schedule(function()
    edit_ask_scheduled[bufnr] = nil
    if vim.api.nvim_buf_is_valid(bufnr) then M.ask_edit(bufnr) end
  end)
end

--- Whether the edit {e} shown in {bufnr} still applies: the buffer is at the version it was answered for and
--- its range holds the text it held when it was shown.
local function edit_applies(bufnr, e)
  if buf_version(bufnr) ~= e.version then return false end
  local ok, lines = pcall(vim.api.nvim_buf_get_text, bufnr, e.row, e.col, e.end_row, e.end_col, {})
  return ok and table.concat(lines, '\n') == e.old
end

--- Apply the next edit shown in {bufnr} (the accept key, after any ghost text); false when none is shown or
--- it no longer applies (then the key keeps its own meaning). Runs scheduled (a key mapping may not change
--- text) and checks again there.
function M.accept_edit(bufnr)
  if not bufnr or bufnr == 0 then bufnr = vim.api.nvim_get_current_buf() end
  local e = shown_edits[bufnr]
  if not e or not edit_applies(bufnr, e) then
    if e then M.clear_edit(bufnr) end
    return false
  end
  vim.schedule(function()
    if shown_edits[bufnr] ~= e then return end
    M.clear_edit(bufnr)
    if not edit_applies(bufnr, e) then return end
    local lines = vim.split(e.text, '\n', { plain = true })
    vim.api.nvim_buf_set_text(bufnr, e.row, e.col, e.end_row, e.end_col, lines)
    local win = vim.api.nvim_get_current_win()
    if vim.api.nvim_win_get_buf(win) == bufnr then
      local last = e.row + #lines - 1
      vim.api.nvim_win_set_cursor(win, { last + 1, (#lines == 1 and e.col or 0) + #lines[#lines] })
    end
    local client = vim.lsp.get_client_by_id(e.client_id)
    if client and e.command then client:exec_cmd(e.command, { bufnr = bufnr }) end
  end)
  return true
end

--- Turn next edits on or off for this session (the server setting `nextEdit`, sent live).
function M.set_next_edit(on)
  M.config.next_edit = on
  M.config.settings = M.config.settings or {}
  M.config.settings.nextEdit = on
  for _, client in ipairs(vim.lsp.get_clients({ name = NAME })) do
    client.settings = { quickcode = M.server_settings() }
    client:notify('workspace/didChangeConfiguration', { settings = client.settings })
  end
  if not on then
    for bufnr in pairs(shown_edits) do M.clear_edit(bufnr) end
  end
  vim.notify('quickcode next edits ' .. (on and 'on' or 'off'))
end

local function watch_edits(bufnr)
  vim.api.nvim_clear_autocmds({ group = edit_augroup, buffer = bufnr })
  vim.api.nvim_create_autocmd({ 'TextChangedI', 'TextChanged' }, { group = edit_augroup, buffer = bufnr,
    callback = function()
      M.clear_edit(bufnr)             -- typed something: the edit shown is for text that is gone
      ask_edit_soon(bufnr)
    end })
  vim.api.nvim_create_autocmd({ 'InsertEnter', 'CursorMovedI' }, { group = edit_augroup, buffer = bufnr,
    callback = function() ask_edit_soon(bufnr) end })
  vim.api.nvim_create_autocmd({ 'InsertLeave', 'BufLeave', 'BufWipeout' }, { group = edit_augroup, buffer = bufnr,
    callback = function() M.clear_edit(bufnr) end })
end

local function on_attach(client, bufnr)
  local mode = M.mode()
  if mode == 'inline' then
    vim.lsp.inline_completion.enable(true, { bufnr = bufnr })
    completor_of(bufnr)     -- its `show` guarded before any item is shown (M._guard_show)
    vim.api.nvim_clear_autocmds({ group = buf_augroup, buffer = bufnr,
                                  event = { 'TextChangedI', 'InsertEnter', 'CursorMovedI', 'BufWipeout' } })
    vim.api.nvim_create_autocmd('TextChangedI', {
      group = buf_augroup, buffer = bufnr, callback = function() on_change(bufnr) end,
    })
    vim.api.nvim_create_autocmd({ 'InsertEnter', 'CursorMovedI' }, {
      group = buf_augroup, buffer = bufnr,
      callback = function(a) on_enter_or_move(bufnr, a.event) end,
    })
    vim.api.nvim_create_autocmd('BufWipeout', {
      group = buf_augroup, buffer = bufnr, callback = function() asked_tick[bufnr] = nil end,
    })
  elseif mode == 'completion' then
    vim.lsp.completion.enable(true, client.id, bufnr, { autotrigger = true, convert = M._convert })
    vim.api.nvim_create_autocmd('CompleteDone', {
      group = buf_augroup, buffer = bufnr, callback = function() complete_done(bufnr) end,
    })
  else
    vim.bo[bufnr].omnifunc = 'v:lua.vim.lsp.omnifunc'
  end
  watch_edits(bufnr)
  map_keys(bufnr)
end

-- ── server commands ─────────────────────────────────────────────────────────────────────────────────

--- Run a server command synchronously; returns its result or nil, err.
function M.exec(command, args, timeout_ms)
  local client = M.client(0) or M.client()
  if not client then return nil, 'quickcode: no language server running' end
  local resp = client:request_sync('workspace/executeCommand', { command = command, arguments = args or {} },
    timeout_ms or 3000, 0)
  if not resp then return nil, 'quickcode: ' .. command .. ' timed out' end
  if resp.err then return nil, 'quickcode: ' .. (resp.err.message or vim.inspect(resp.err)) end
  return resp.result
end

function M.status_line()
  local s = M.status
  if not M.client() then return 'quickcode: not running' end
  if not s then return 'quickcode: starting' end
  local state = s.enabled == false and 'off' or (s.connected and 'connected' or 'disconnected')
  local p50 = s.recent_first_chunk_ms_p50 and (' %d ms'):format(s.recent_first_chunk_ms_p50) or ''
  return ('quickcode: %s%s'):format(state, p50)
end

function M.show_status()
  local s, err = M.exec('quickcode.status')
  if not s then return vim.notify(err, vim.log.levels.WARN) end
  M.status = s
  local lines = { M.status_line() }
  for _, key in ipairs({ 'endpoint', 'model', 'replica', 'recent_first_chunk_ms_p50', 'acceptance_rate', 'last_error' }) do
    if s[key] ~= nil and s[key] ~= vim.NIL and s[key] ~= '' then table.insert(lines, ('  %s: %s'):format(key, tostring(s[key]))) end
  end
  vim.notify(table.concat(lines, '\n'), vim.log.levels.INFO)
end

function M.show_latency()
  local report, err = M.exec('quickcode.latencyReport')
  if not report then return vim.notify(err, vim.log.levels.WARN) end
  vim.cmd('botright new')
  local buf = vim.api.nvim_get_current_buf()
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].swapfile = false
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split('# quickcode latency report\n\n' .. report, '\n'))
  vim.bo[buf].filetype = 'markdown'
  vim.bo[buf].modifiable = false
end

function M.set_enabled(enabled)
  M.config.settings = M.config.settings or {}
  M.config.settings.enabled = enabled
  for _, client in ipairs(vim.lsp.get_clients({ name = NAME })) do
    client.settings = { quickcode = M.server_settings() }
    client:notify('workspace/didChangeConfiguration', { settings = client.settings })
    client:request('workspace/executeCommand', { command = enabled and 'quickcode.enable' or 'quickcode.disable', arguments = {} },
      function() end)
  end
  vim.notify('quickcode ' .. (enabled and 'enabled' or 'disabled'))
end

function M.toggle()
  local enabled = (M.config.settings or {}).enabled
  M.set_enabled(enabled == false)
end

-- ── setup ───────────────────────────────────────────────────────────────────────────────────────────

---@param opts? quickcode.Config
function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(defaults), opts or {})
  M.did_setup = true
  if opts and opts.keymaps == false then M.config.keymaps = {} end
  vim.api.nvim_clear_autocmds({ group = augroup })
  vim.api.nvim_create_autocmd('LspAttach', {
    group = augroup,
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data.client_id)
      if client and client.name == NAME then on_attach(client, args.buf) end
    end,
  })
  local cfg = lsp_config()
  if vim.lsp.config and vim.lsp.enable then
    -- 0.11+: a named config, started for matching buffers by Neovim itself
    vim.lsp.config(NAME, cfg)
    vim.lsp.enable(NAME)
  else
    -- 0.10: start (or reuse) the client on FileType ourselves
    vim.api.nvim_create_autocmd('FileType', {
      group = augroup,
      callback = function(args)
        if vim.bo[args.buf].buftype ~= '' then return end
        if cfg.filetypes and not vim.tbl_contains(cfg.filetypes, vim.bo[args.buf].filetype) then return end
        local c = vim.deepcopy(cfg)
        if vim.api.nvim_buf_get_name(args.buf) == '' then return end
        c.root_dir = vim.fs.root(args.buf, M.config.root_markers or { '.git' }) or vim.fn.getcwd()
        vim.lsp.start(c, { bufnr = args.buf, reuse_client = cfg.reuse_client })
      end,
    })
  end
  return M
end

return M
