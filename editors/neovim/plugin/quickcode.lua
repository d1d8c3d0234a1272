-- quickcode user commands. The server starts only after require('quickcode').setup({...}).
if vim.g.loaded_quickcode then return end
vim.g.loaded_quickcode = true

local function qc() return require('quickcode') end
local cmd = vim.api.nvim_create_user_command
cmd('QuickcodeStatus', function() qc().show_status() end, { desc = 'quickcode: connection state and latency' })
cmd('QuickcodeLatency', function() qc().show_latency() end, { desc = 'quickcode: latency report (markdown)' })
cmd('QuickcodeToggle', function() qc().toggle() end, { desc = 'quickcode: enable/disable completions' })
cmd('QuickcodeEnable', function() qc().set_enabled(true) end, { desc = 'quickcode: enable completions' })
cmd('QuickcodeDisable', function() qc().set_enabled(false) end, { desc = 'quickcode: disable completions' })
cmd('QuickcodeRestart', function()
  for _, c in ipairs(vim.lsp.get_clients({ name = 'quickcode' })) do c:stop() end
  vim.defer_fn(function() vim.cmd('doautoall FileType') end, 500)
end, { desc = 'quickcode: restart the language server' })
cmd('QuickcodeNextEdit', function(a)
  local q = qc()
  local on = ({ on = true, off = false })[a.args]
  if on == nil then on = q.server_settings().nextEdit ~= true end
  q.set_next_edit(on)
end, { nargs = '?', complete = function() return { 'on', 'off', 'toggle' } end,
       desc = 'quickcode: next-edit suggestions on, off or toggled' })
