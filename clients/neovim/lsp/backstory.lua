-- LSP config for the Backstory language server; enable it with vim.lsp.enable("backstory").
-- Options come from vim.g.backstory (see :help backstory-config) and can be overridden with
-- vim.lsp.config("backstory", { ... }).
local config = require("backstory.config")
local blsp = require("backstory.lsp")

-- Client-side commands carried by the server's code actions (backstory.ui.*).
blsp.register()

local cfg = config.get()
local server_options = config.server_options(cfg)

return {
  cmd = cfg.cmd,
  filetypes = cfg.filetypes,
  root_markers = { ".git" },
  init_options = server_options,
  settings = { backstory = vim.deepcopy(server_options) },
  handlers = blsp.handlers,
  on_exit = blsp.on_exit,
}
