-- backstory.nvim: defines :Backstory; everything else loads on first use.
if vim.g.loaded_backstory then
  return
end
vim.g.loaded_backstory = true

vim.api.nvim_create_user_command("Backstory", function(opts)
  require("backstory").run(opts)
end, {
  nargs = "*",
  range = true,
  bang = true,
  desc = "Backstory: prior art from git history (prior-art, search, history, actions, diff, file, show, reindex, status)",
  complete = function(arglead, cmdline, cursorpos)
    return require("backstory").complete(arglead, cmdline, cursorpos)
  end,
})

-- `backstory://<sha>` (a commit) and `backstory://<sha>:<path>` (a file at a revision) are read from the server,
-- so quickfix entries, :edit and :diffsplit open them like files.
local group = vim.api.nvim_create_augroup("backstory", { clear = true })
vim.api.nvim_create_autocmd("BufReadCmd", {
  group = group,
  pattern = "backstory://*",
  desc = "Backstory: read a commit or a file at a revision from the language server",
  callback = function(ev)
    require("backstory").read_buffer(ev.buf)
  end,
})

-- vim.lsp.enable() skips a server whose command is not executable without a word: say it once, with the fix.
vim.api.nvim_create_autocmd("FileType", {
  group = group,
  desc = "Backstory: tell once when the enabled language server is not installed",
  callback = function(ev)
    if vim.g.backstory_missing_reported or not (vim.lsp.is_enabled and vim.lsp.is_enabled("backstory")) then
      return
    end
    local ok, cfg = pcall(function()
      return vim.lsp.config["backstory"]
    end)
    if not ok or type(cfg) ~= "table" or type(cfg.cmd) ~= "table" or not vim.tbl_contains(cfg.filetypes or {}, ev.match) then
      return
    end
    if vim.fn.executable(cfg.cmd[1]) ~= 1 and vim.fs.root(ev.buf, ".git") then
      vim.g.backstory_missing_reported = true
      vim.notify("Backstory: " .. require("backstory").why_no_client(ev.buf), vim.log.levels.ERROR)
    end
  end,
})
