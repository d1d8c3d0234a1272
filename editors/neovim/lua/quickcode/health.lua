--- :checkhealth quickcode — is the plugin set up, does the server start, and why are completions empty?
--- The backend checks are `quickcode doctor` (quickcode/lsp_client/doctor.py) run with this plugin's command, endpoints
--- and token: reachable, TLS, ready, token, protocol version, model, latency — each with its fix.
local M = {}

local health = vim.health
local DOCTOR_TIMEOUT_MS = 60000

--- The doctor's command line: the server command with its `lsp` argument replaced by `doctor`.
function M.doctor_cmd(server_cmd, endpoints)
  local cmd = {}
  local replaced = false
  for _, arg in ipairs(server_cmd) do
    if arg == 'lsp' and not replaced then
      table.insert(cmd, 'doctor')
      replaced = true
    elseif arg ~= '--stdio' then
      table.insert(cmd, arg)
    end
  end
  if not replaced then table.insert(cmd, 'doctor') end
  table.insert(cmd, '--json')
  for _, e in ipairs(endpoints or {}) do
    table.insert(cmd, '--endpoint')
    table.insert(cmd, e)
  end
  return cmd
end

local function report_doctor(line)
  local ok, rep = pcall(vim.json.decode, line)
  if not ok or type(rep) ~= 'table' or type(rep.checks) ~= 'table' then
    health.error('quickcode doctor printed something else: ' .. line)
    return
  end
  health.start('quickcode: backend ' .. tostring(rep.endpoint))
  for _, c in ipairs(rep.checks) do
    local msg = ('%s: %s'):format(c.name, c.detail)
    local advice = (c.fix and c.fix ~= '') and { c.fix } or nil
    if c.status == 'ok' then
      health.ok(msg)
    elseif c.status == 'warn' then
      health.warn(msg, advice)
    elseif c.status == 'fail' then
      health.error(msg, advice)
    else
      health.info(msg)
    end
  end
end

function M.check()
  local qc = require('quickcode')
  health.start('quickcode: plugin')
  if vim.fn.has('nvim-0.12') == 1 and vim.lsp.inline_completion then
    health.ok(('Neovim %s: ghost text (vim.lsp.inline_completion)'):format(tostring(vim.version())))
  elseif vim.fn.has('nvim-0.10') == 1 then
    health.warn(('Neovim %s: no inline completion; suggestions come as one completion-menu item'):format(
      tostring(vim.version())), { 'Neovim 0.12 or newer shows ghost text' })
  else
    health.error('Neovim 0.10 or newer is needed', { 'upgrade Neovim' })
  end
  if qc.did_setup then
    health.ok('setup() was called; mode: ' .. qc.mode())
    if qc.mode() == 'inline' and qc.config.ask == 'keystroke' and not qc.can_ask_now() then
      health.warn("ask = 'keystroke', but this Neovim's inline-completion state is not where the plugin looks: "
        .. 'it asks as Neovim does by itself, 200 ms after the last key',
        { "set ask = 'pause' to say so, or report the Neovim version (the plugin reads vim.lsp._capability)" })
    elseif qc.mode() == 'inline' then
      health.ok(qc.config.ask == 'keystroke' and 'asks on every change (ask = keystroke)'
        or 'asks 200 ms after the last key, as Neovim does (ask = pause)')
    end
  else
    health.error('require("quickcode").setup({...}) was not called: the server never starts',
      { 'add require("quickcode").setup({ endpoints = { "ws://HOST:8765/v1/ws" } }) to your config' })
  end

  local cmd = qc._server_cmd()
  if vim.fn.executable(cmd[1]) == 1 then
    health.ok(('server command: %s (%s)'):format(table.concat(cmd, ' '), vim.fn.exepath(cmd[1])))
  else
    health.error(('server command %q is not executable or not on PATH'):format(cmd[1]), {
      "pipx install 'quickcode[lsp]' (or pip install into a venv)",
      "or give the full path: setup({ cmd = { '/path/to/venv/bin/quickcode', 'lsp' } })",
    })
    return
  end
  local client = qc.client()
  if client then
    local s = qc.status
    health.ok(('server running (client id %d)'):format(client.id))
    if s and s.connected then
      health.ok(('connected to %s'):format(tostring(s.endpoint)))
    elseif s then
      health.warn('the server is not connected to a backend: ' .. tostring(s.last_error or 'reconnecting'),
        { 'see the backend checks below' })
    end
  else
    health.info('no quickcode server running now (it starts with the first file buffer)')
  end

  local env = vim.fn.environ()
  if qc.config.token and qc.config.token ~= '' then env.QUICKCODE_TOKEN = qc.config.token end
  local dcmd = M.doctor_cmd(cmd, qc.config.endpoints)
  local ok, proc = pcall(vim.system, dcmd, { text = true, env = env, clear_env = true })
  if not ok then
    health.error('could not run ' .. table.concat(dcmd, ' ') .. ': ' .. tostring(proc))
    return
  end
  local res = proc:wait(DOCTOR_TIMEOUT_MS)
  local lines = vim.split(res.stdout or '', '\n', { trimempty = true })
  if #lines == 0 then
    health.error(('`%s` printed nothing (exit %s): %s'):format(table.concat(dcmd, ' '), tostring(res.code),
      vim.trim(res.stderr or '')), { 'an old quickcode without `doctor`? upgrade: pipx upgrade quickcode' })
    return
  end
  for _, line in ipairs(lines) do report_doctor(line) end
end

return M
