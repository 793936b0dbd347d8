-- plugin/backstory.lua defines :Backstory and loads nothing else eagerly.
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)")
local T = dofile(here .. "harness.lua")

local loaded_before = {}
for name in pairs(package.loaded) do
  loaded_before[name] = true
end
vim.cmd("runtime! plugin/backstory.lua")
local newly = {}
for name in pairs(package.loaded) do
  if not loaded_before[name] then
    table.insert(newly, name)
  end
end

T.test("defines one user command", function()
  local cmds = vim.api.nvim_get_commands({})
  T.truthy(cmds.Backstory, ":Backstory defined")
  T.eq("*", cmds.Backstory.nargs)
  T.eq(true, cmds.Backstory.bang)
  local ours = vim.tbl_filter(function(n)
    return n:match("^Backstory")
  end, vim.tbl_keys(cmds))
  T.eq({ "Backstory" }, ours)
end)

T.test("loads no module eagerly", function()
  T.eq({}, newly)
  T.eq(nil, package.loaded["backstory"])
  T.eq(nil, rawget(vim, "lsp"), "vim.lsp not loaded by the plugin")
end)

T.test("sourcing twice is harmless", function()
  vim.cmd("runtime! plugin/backstory.lua")
  T.truthy(vim.api.nvim_get_commands({}).Backstory)
end)

T.test("completion", function()
  T.eq({ "prior-art", "changes", "search", "history", "actions", "diff", "file", "show", "reindex", "status" }, vim.fn.getcompletion("Backstory ", "cmdline"))
  T.eq({ "search", "show", "status" }, vim.fn.getcompletion("Backstory s", "cmdline"))
  T.eq({ "reindex" }, vim.fn.getcompletion("Backstory! re", "cmdline"))
end)

T.test("help tags", function()
  -- work on a copy so that the repository gets no `tags` file
  local src = vim.fn.fnamemodify(here .. "../../clients/neovim/doc/backstory.txt", ":p")
  local dir = vim.fn.tempname() .. "/doc"
  vim.fn.mkdir(dir, "p")
  vim.fn.writefile(vim.fn.readfile(src), dir .. "/backstory.txt")
  vim.cmd("helptags " .. vim.fn.fnameescape(dir))
  vim.opt.rtp:prepend(vim.fn.fnamemodify(dir, ":h"))
  for _, tag in ipairs({ "backstory", ":Backstory", "backstory-config", "backstory-statusline", "backstory-install", "backstory-health", "backstory.statusline()", ":Backstory-actions", ":Backstory-changes", ":Backstory-diff", ":Backstory-file", "backstory-buffers" }) do
    local ok, err = pcall(vim.cmd.help, tag)
    T.truthy(ok, "help tag " .. tag .. ": " .. tostring(err))
  end
end)

T.finish({ newly_loaded = newly })
