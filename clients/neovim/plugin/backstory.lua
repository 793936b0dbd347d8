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
  desc = "Backstory: prior art from git history (prior-art, search, history, show, reindex, status)",
  complete = function(arglead, cmdline, cursorpos)
    return require("backstory").complete(arglead, cmdline, cursorpos)
  end,
})
