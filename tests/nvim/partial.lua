-- End-to-end: partial results, reindex completion and a subfolder workspace, against the real server.
-- The repository was indexed by the CLI before its newest commit; this script holds the index's write lock
-- (as another `backstory index` would) so the server cannot catch up, checks that answers say they are
-- partial, releases the lock, reindexes, and checks that the end is reported and answers are complete. The
-- workspace folder (root_dir) is a subfolder of the repository.
-- Environment: BACKSTORY_CMD, BACKSTORY_FILE, BACKSTORY_LINE, BACKSTORY_SYMBOL, BACKSTORY_SUBJECT (a commit of
-- the symbol's history), BACKSTORY_LATE (the newest commit's subject, not indexed yet), BACKSTORY_LOCK (the
-- index's write.lock), BACKSTORY_ROOT (the workspace folder), BACKSTORY_TIMEOUT_MS.
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)")
local T = dofile(here .. "harness.lua")

local env = vim.env
local file, line, symbol = env.BACKSTORY_FILE, tonumber(env.BACKSTORY_LINE), env.BACKSTORY_SYMBOL
local subject, late = env.BACKSTORY_SUBJECT, env.BACKSTORY_LATE
local timeout = tonumber(env.BACKSTORY_TIMEOUT_MS or "30000")
local extra = { notifications = {}, statuses = {} }

vim.notify = function(msg, level)
  table.insert(extra.notifications, { msg = tostring(msg), level = level })
end

local picks = {}
vim.ui.select = function(items, opts, on_choice)
  local lines = vim.tbl_map(opts.format_item or tostring, items)
  table.insert(picks, { prompt = opts.prompt, lines = lines })
  for i, l in ipairs(lines) do
    if l:find("^History of ") then
      return on_choice(items[i], i) -- open the exact history as a second list
    end
  end
end

vim.api.nvim_create_autocmd("User", {
  pattern = "BackstoryStatus",
  callback = function(ev)
    table.insert(extra.statuses, ev.data.status)
  end,
})

local function ok_or_fail(cond, what)
  if not cond then
    error(what, 2)
  end
end

local function any_contains(lines, needle)
  for _, l in ipairs(lines) do
    if l:find(needle, 1, true) then
      return true
    end
  end
  return false
end

-- another indexer holds the write lock
local holder_code = "import fcntl, sys, time\nf = open(sys.argv[1], 'a')\nfcntl.flock(f, fcntl.LOCK_EX)\n"
  .. "print('locked', flush=True)\ntime.sleep(3600)\n"
local locked = false
local holder = vim.system({ "python3", "-c", holder_code, env.BACKSTORY_LOCK }, {
  stdout = function(_, data)
    if data and data:find("locked", 1, true) then
      locked = true
    end
  end,
})
vim.wait(10000, function()
  return locked
end, 20)

vim.cmd("filetype on")
vim.cmd("runtime! plugin/backstory.lua")
vim.g.backstory = { cmd = vim.json.decode(env.BACKSTORY_CMD), dense = false, open = "split" }
vim.lsp.config("backstory", { root_dir = env.BACKSTORY_ROOT })
vim.lsp.enable("backstory")
vim.cmd.edit(vim.fn.fnameescape(file))
local src = vim.api.nvim_get_current_buf()
local status = require("backstory.status")

local function client()
  return require("backstory.lsp").client(src)
end

local function to_symbol()
  vim.api.nvim_set_current_buf(src)
  local text = vim.api.nvim_buf_get_lines(src, line - 1, line, false)[1]
  vim.api.nvim_win_set_cursor(0, { line, (text:find(symbol, 1, true) or 1) - 1 })
end

local function run_and_pick(ex)
  local before = #picks
  local nbefore = #extra.notifications
  vim.cmd(ex)
  ok_or_fail(vim.wait(timeout, function()
    return #picks > before or #extra.notifications > nbefore
  end, 50), ex .. ": nothing within the timeout")
  ok_or_fail(#picks > before, ex .. ": no picker; " .. vim.inspect(extra.notifications[#extra.notifications]))
  return picks[before + 1], vim.list_slice(picks, before + 1)
end

T.test("the workspace folder is a subfolder of the repository", function()
  ok_or_fail(vim.wait(timeout, function()
    return client() ~= nil and client().initialized
  end, 50), "no client")
  T.eq(env.BACKSTORY_ROOT, client().root_dir)
end)

T.test("while another indexer holds the lock: the status line says indexing", function()
  ok_or_fail(locked, "the lock holder did not take the lock")
  ok_or_fail(vim.wait(timeout, function()
    local s = status.get(src)
    return s ~= nil and s.state == "indexing"
  end, 50), "no indexing status: " .. vim.inspect(extra.statuses))
  extra.statusline_indexing = require("backstory").statusline(src)
  T.contains(extra.statusline_indexing, "Backstory: indexing history")
end)

T.test("partial results are labelled in the picker and the quickfix list", function()
  to_symbol()
  local first, all = run_and_pick("Backstory prior-art")
  extra.partial = all
  T.contains(first.prompt, "(partial: indexing")
  ok_or_fail(not first.prompt:find("backstory index", 1, true), "advice to run backstory index while indexing")
  T.contains(all[2].prompt, "(partial: indexing")
  ok_or_fail(not any_contains(all[2].lines, late), "the commit not indexed yet is listed")
  ok_or_fail(any_contains(all[2].lines, subject), "the indexed history is listed: " .. vim.inspect(all[2].lines))
  vim.cmd("Backstory! prior-art")
  ok_or_fail(vim.wait(timeout, function()
    return vim.fn.getqflist({ title = 1 }).title:find("Backstory", 1, true) ~= nil
  end, 50), "no quickfix list")
  T.contains(vim.fn.getqflist({ title = 1 }).title, "(partial: indexing")
end)

T.test("the lock is released: reindex reports when it is done", function()
  holder:kill(9)
  holder:wait(5000)
  ok_or_fail(vim.wait(timeout * 2, function()
    local s = status.get(src)
    return s ~= nil and (s.state == "ready" or s.state == "error")
  end, 50), "the server neither finished nor gave up")
  local n = #extra.notifications
  vim.cmd("Backstory reindex")
  ok_or_fail(vim.wait(timeout * 2, function()
    for i = n + 1, #extra.notifications do
      if extra.notifications[i].msg:find("reindexing finished", 1, true) then
        return true
      end
    end
    return false
  end, 50), "no 'reindexing finished': " .. vim.inspect(vim.list_slice(extra.notifications, n + 1)))
  extra.reindex_messages = vim.tbl_map(function(x)
    return x.msg
  end, vim.list_slice(extra.notifications, n + 1))
  T.eq("Backstory: ready", require("backstory").statusline(src))
end)

T.test("complete answers: no partial label, the newest commit in the exact history", function()
  to_symbol()
  local first, all = run_and_pick("Backstory prior-art")
  extra.complete = all
  ok_or_fail(not first.prompt:find("partial", 1, true), first.prompt)
  ok_or_fail(any_contains(all[2].lines, late), "newest commit missing: " .. vim.inspect(all[2].lines))
end)

T.test("a subfolder workspace gets the exact history", function()
  to_symbol()
  local pick = run_and_pick("Backstory history")
  extra.history = pick
  ok_or_fail(any_contains(pick.lines, subject) and any_contains(pick.lines, late), vim.inspect(pick.lines))
end)

for _, c in ipairs(vim.lsp.get_clients()) do
  c:stop()
end
vim.wait(2000, function()
  return #vim.lsp.get_clients() == 0
end, 50)
T.finish(extra)
