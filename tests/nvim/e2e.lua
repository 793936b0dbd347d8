-- End-to-end: the plugin against the real `backstory serve`.
-- Environment:
--   BACKSTORY_CMD        JSON list, the server command
--   BACKSTORY_FILE       absolute path of the Python file to open
--   BACKSTORY_LINE       1-based line of the symbol (its `def` line)
--   BACKSTORY_SYMBOL     the symbol's name
--   BACKSTORY_SUBJECT    subject of the commit that must be offered as prior art
--   BACKSTORY_DIFF_LINE  a line that must be in that commit's diff buffer
--   BACKSTORY_SEARCH     a search query that must find that commit
--   BACKSTORY_OPTIONS    JSON object merged into vim.g.backstory
--   BACKSTORY_TIMEOUT_MS how long to wait for the server (default 15000)
-- Writes {results = [{name, ok, err}], extra = {...}} as JSON to stdout.
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)")
local T = dofile(here .. "harness.lua")

local env = vim.env
local cmd = vim.json.decode(env.BACKSTORY_CMD)
local file = env.BACKSTORY_FILE
local line = tonumber(env.BACKSTORY_LINE)
local symbol = env.BACKSTORY_SYMBOL
local subject = env.BACKSTORY_SUBJECT
local diff_line = env.BACKSTORY_DIFF_LINE
local query = env.BACKSTORY_SEARCH
local timeout = tonumber(env.BACKSTORY_TIMEOUT_MS or "15000")

local extra = { notifications = {}, statuses = {} }

-- Record notifications instead of printing them.
vim.notify = function(msg, level)
  table.insert(extra.notifications, { msg = tostring(msg), level = level })
end

-- Stand in for the user at vim.ui.select (what Telescope / fzf-lua / snacks replace): record the formatted
-- items and choose the one with the expected subject, else the "History of …" entry (which opens the exact
-- history as a second list), else `want` when set, else the first.
local picks = {}
local want = nil
vim.ui.select = function(items, opts, on_choice)
  local lines = vim.tbl_map(opts.format_item or tostring, items)
  local chosen
  for i, l in ipairs(lines) do
    if want and l:find(want, 1, true) then
      chosen = i
      break
    end
  end
  for i, l in ipairs(lines) do
    if not chosen and l:find(subject, 1, true) then
      chosen = i
    end
  end
  for i, l in ipairs(lines) do
    if not chosen and l:find("^History of ") then
      chosen = i
    end
  end
  chosen = chosen or 1
  table.insert(picks, { prompt = opts.prompt, lines = lines, chosen = chosen })
  on_choice(items[chosen], chosen)
end

vim.api.nvim_create_autocmd("User", {
  pattern = "BackstoryStatus",
  callback = function(ev)
    table.insert(extra.statuses, ev.data.status)
  end,
})

vim.cmd("filetype on")
vim.cmd("runtime! plugin/backstory.lua")
vim.g.backstory = vim.tbl_extend("force", { cmd = cmd, open = "split" }, vim.json.decode(env.BACKSTORY_OPTIONS or "{}"))
vim.lsp.enable("backstory")
vim.cmd.edit(vim.fn.fnameescape(file))
local src = vim.api.nvim_get_current_buf()
local src_win = vim.api.nvim_get_current_win()

local function client()
  return require("backstory.lsp").client(src)
end

local function ok_or_fail(cond, what)
  if not cond then
    error(what, 2)
  end
end

local function to_symbol()
  vim.api.nvim_set_current_win(src_win)
  vim.api.nvim_win_set_buf(src_win, src)
  local text = vim.api.nvim_buf_get_lines(src, line - 1, line, false)[1]
  local col = text:find(symbol, 1, true) or 1
  vim.api.nvim_win_set_cursor(src_win, { line, col - 1 })
end

--- Run an ex command and wait for the picker; returns the first list shown (and all lists shown).
local function run_and_pick(ex)
  local before = #picks
  local nbefore = #extra.notifications
  vim.cmd(ex)
  local got = vim.wait(timeout, function()
    return #picks > before or #extra.notifications > nbefore
  end, 50)
  ok_or_fail(got, ex .. ": no picker and no message within the timeout")
  if #picks == before then
    error(ex .. ": no picker; message: " .. extra.notifications[#extra.notifications].msg)
  end
  return picks[before + 1], vim.list_slice(picks, before + 1)
end

local function any_contains(lines, needle)
  for _, l in ipairs(lines) do
    if l:find(needle, 1, true) then
      return true
    end
  end
  return false
end

local function wait_commit_buffer()
  local buf
  vim.wait(timeout, function()
    local b = vim.api.nvim_get_current_buf()
    if vim.api.nvim_buf_get_name(b):match("^backstory://") then
      buf = b
      return true
    end
    return false
  end, 50)
  return buf
end

T.test("client attaches", function()
  local attached = vim.wait(timeout, function()
    local c = client()
    return c ~= nil and c.initialized == true
  end, 50)
  ok_or_fail(attached, "no backstory client attached to " .. file .. " (filetype " .. vim.bo[src].filetype .. ")")
  extra.server_info = client().server_info
end)

local function lsp_log_tail()
  local path = vim.lsp.log.get_filename()
  if vim.fn.filereadable(path) == 1 then
    local lines = vim.fn.readfile(path)
    return vim.list_slice(lines, math.max(1, #lines - 40))
  end
  return {}
end

if not T.results[#T.results].ok or not client() then
  -- Without a client every other check would only wait for its timeout.
  extra.lsp_log = lsp_log_tail()
  T.finish(extra)
end

T.test("server reports ready", function()
  ok_or_fail(client(), "no client")
  local st = require("backstory.status")
  local ready = vim.wait(timeout, function()
    local s = st.get(src)
    return client() == nil or (s ~= nil and s.state == "ready")
  end, 50)
  ready = ready and client() ~= nil
  extra.ready_via = ready and "notification" or nil
  if not ready then
    -- Fall back to polling the status command (documented alternative).
    local blsp = require("backstory.lsp")
    ready = vim.wait(timeout, function()
      if not client() then
        return true -- the server exited
      end
      local res = blsp.exec_sync(client(), "backstory.status", { uri = vim.uri_from_bufnr(src) }, src, 2000)
      extra.last_status_reply = res
      if type(res) ~= "table" then
        return false
      end
      local idx = type(res.index) == "table" and res.index or res
      return (tonumber(idx.indexed_commits) or 0) > 0 and (tonumber(idx.commits_behind_head) or 1) == 0
    end, 300)
    extra.ready_via = ready and "status-command" or nil
  end
  ok_or_fail(client(), "the server exited; messages: " .. vim.inspect(extra.notifications))
  ok_or_fail(ready, "the server never reported ready; statuses: " .. vim.inspect(extra.statuses))
  ok_or_fail(extra.ready_via == "notification", "no backstory/status notification with state ready (polling worked)")
end)

if not client() then
  extra.lsp_log = lsp_log_tail()
  T.finish(extra)
end

T.test("statusline", function()
  local s = require("backstory").statusline(src)
  extra.statusline = s
  T.eq("Backstory: ready", s)
  local with_units = false
  for _, st in ipairs(extra.statuses) do
    local text = require("backstory.format").status_text(st)
    if text:match("^Backstory: indexing history %d[%d,]*/%d[%d,]* commits$") or text:match("^Backstory: embedding %d[%d,]*/%d[%d,]* files$") then
      with_units = true
    end
  end
  T.truthy(with_units, "progress said with units: " .. vim.inspect(vim.tbl_map(require("backstory.format").status_text, extra.statuses)))
  local states = {}
  for _, st in ipairs(extra.statuses) do
    states[st.state] = true
  end
  T.truthy(states.ready, "User BackstoryStatus fired with state ready")
end)

T.test("prior art first; the exact history is one entry that opens a second list", function()
  to_symbol()
  local first, all = run_and_pick("Backstory prior-art")
  extra.prior_art = all
  T.contains(first.prompt, "prior art for " .. symbol)
  local last = first.lines[#first.lines]
  ok_or_fail(last:find("^History of " .. symbol .. ": %d+ changes?…$"), "the last entry is not the history: " .. vim.inspect(first.lines))
  for i = 1, #first.lines - 1 do
    ok_or_fail(not first.lines[i]:find("^History of "), "history entry not last: " .. vim.inspect(first.lines))
    ok_or_fail(not first.lines[i]:find(subject, 1, true), "the exact history leads: " .. vim.inspect(first.lines))
    ok_or_fail(not first.lines[i]:find("[%[#`]"), "jargon or backticks in a row: " .. first.lines[i])
  end
  ok_or_fail(#first.lines >= 2, "no related commits before the history: " .. vim.inspect(first.lines))
  local second = all[2]
  ok_or_fail(second and second.prompt:find("history of " .. symbol, 1, true), "no second list: " .. vim.inspect(all))
  ok_or_fail(any_contains(second.lines, subject), "subject not in the history: " .. vim.inspect(second.lines))
  ok_or_fail(any_contains(second.lines, "same function"), "exact history rows say why: " .. vim.inspect(second.lines))
end)

T.test("choosing opens the commit diff", function()
  local buf = wait_commit_buffer()
  ok_or_fail(buf, "no backstory:// buffer opened; messages: " .. vim.inspect(extra.notifications))
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  extra.diff = { name = vim.api.nvim_buf_get_name(buf), cursor = vim.api.nvim_win_get_cursor(0), nlines = #lines }
  T.eq("git", vim.bo[buf].filetype)
  T.eq("nofile", vim.bo[buf].buftype)
  T.eq("hide", vim.bo[buf].bufhidden)
  T.eq(false, vim.bo[buf].modifiable)
  ok_or_fail(vim.tbl_contains(lines, diff_line), ("%q not in the diff buffer:\n%s"):format(diff_line, table.concat(lines, "\n")))
  local cur = vim.api.nvim_get_current_line()
  extra.diff.cursor_line = cur
  ok_or_fail(cur:match("^@@ .* @@ def " .. symbol .. "%("), "cursor is not on the hunk header with its definition: " .. cur)
end)

T.test("the diff view: the file before/after the commit, side by side", function()
  -- in the commit buffer (still current), on an added line of the hunk: gd
  local buf = vim.api.nvim_get_current_buf()
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local row
  for i, l in ipairs(lines) do
    if l == diff_line then
      row = i
    end
  end
  vim.api.nvim_win_set_cursor(0, { row, 0 })
  local tabs = #vim.api.nvim_list_tabpages()
  vim.api.nvim_feedkeys("gd", "x", false)
  T.eq(tabs + 1, #vim.api.nvim_list_tabpages())
  local wins = vim.api.nvim_tabpage_list_wins(0)
  T.eq(2, #wins)
  local names, texts = {}, {}
  for _, w in ipairs(wins) do
    local b = vim.api.nvim_win_get_buf(w)
    T.eq(true, vim.wo[w].diff)
    T.eq("python", vim.bo[b].filetype)
    table.insert(names, vim.api.nvim_buf_get_name(b))
    table.insert(texts, table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), "\n"))
  end
  extra.diff_view = names
  local rel = vim.fn.fnamemodify(file, ":."):gsub("^.*/src/", "src/")
  ok_or_fail(names[1]:match("^backstory://%x+%^:" .. vim.pesc(rel) .. "$"), "left: " .. names[1])
  ok_or_fail(names[2]:match("^backstory://%x+:" .. vim.pesc(rel) .. "$"), "right: " .. names[2])
  ok_or_fail(not texts[1]:find(diff_line:sub(2), 1, true), "the left side is before the commit")
  ok_or_fail(texts[2]:find(diff_line:sub(2), 1, true), "the right side is after the commit")
  vim.cmd("tabclose")
  -- gf: the file as it was in the commit, at the line under the cursor
  vim.api.nvim_set_current_buf(buf)
  vim.api.nvim_win_set_cursor(0, { row, 0 })
  vim.api.nvim_feedkeys("gf", "x", false)
  local fb = vim.api.nvim_get_current_buf()
  extra.file_at = vim.api.nvim_buf_get_name(fb)
  ok_or_fail(extra.file_at:match("^backstory://%x+:" .. vim.pesc(rel) .. "$"), "gf: " .. extra.file_at)
  T.eq(diff_line:sub(2), vim.api.nvim_get_current_line())
  vim.cmd("close")
end)

T.test("prior-art with bang: quickfix entries open the commit at the hunk", function()
  to_symbol()
  vim.fn.setqflist({}, "r", { title = "none", items = {} })
  vim.cmd("Backstory! prior-art")
  local got = vim.wait(timeout, function()
    return vim.fn.getqflist({ title = 1 }).title:find("Backstory", 1, true) ~= nil
  end, 50)
  ok_or_fail(got, "quickfix list not set")
  local qf = vim.fn.getqflist({ items = 1 }).items
  ok_or_fail(#qf > 0, "empty quickfix list")
  local texts, index = {}, nil
  for i, item in ipairs(qf) do
    table.insert(texts, item.text)
    ok_or_fail(vim.api.nvim_buf_get_name(item.bufnr):match("^backstory://%x+$"), "a working-tree path: " .. vim.api.nvim_buf_get_name(item.bufnr))
    if item.text:find(subject, 1, true) then
      index = i
    end
  end
  extra.quickfix = texts
  ok_or_fail(index, "subject not in quickfix: " .. vim.inspect(texts))
  vim.cmd("cclose")
  vim.api.nvim_set_current_win(src_win)
  vim.cmd("silent cc " .. index)
  local b = vim.api.nvim_get_current_buf()
  ok_or_fail(vim.api.nvim_buf_get_name(b):match("^backstory://%x+$"), "cc opened " .. vim.api.nvim_buf_get_name(b))
  ok_or_fail(vim.tbl_contains(vim.api.nvim_buf_get_lines(b, 0, -1, false), diff_line), "not the commit")
  ok_or_fail(vim.api.nvim_get_current_line():match("^@@"), "cc is not at the hunk: " .. vim.api.nvim_get_current_line())
  vim.api.nvim_win_set_buf(src_win, src)
end)

T.test("prior-art on a selection", function()
  to_symbol()
  local pick = run_and_pick(("%d,%dBackstory prior-art"):format(line, line + 4))
  extra.selection = pick
  T.truthy(#pick.lines > 0, "results for the selection")
  T.contains(pick.prompt, "prior art for the selection")
  ok_or_fail(not pick.lines[1]:find("^History of "), "the first screen is prior art for the selection: " .. vim.inspect(pick.lines))
  local buf = wait_commit_buffer()
  if buf then
    vim.cmd("close")
  end
end)

T.test("prior-art on a charwise selection", function()
  to_symbol()
  vim.cmd("normal! v" .. (#symbol - 1) .. "l\27")
  local pick = run_and_pick("'<,'>Backstory prior-art")
  extra.charwise = pick
  T.truthy(#pick.lines > 0, "results for the selection")
  local buf = wait_commit_buffer()
  if buf then
    vim.cmd("close")
  end
end)

T.test("history of the symbol", function()
  to_symbol()
  local pick = run_and_pick("Backstory history")
  extra.history = pick
  ok_or_fail(any_contains(pick.lines, subject), "subject not in history: " .. vim.inspect(pick.lines))
  local buf = wait_commit_buffer()
  ok_or_fail(buf, "no commit buffer from history")
  vim.cmd("close")
end)

T.test("search", function()
  to_symbol()
  local pick = run_and_pick("Backstory search " .. query)
  extra.search = pick
  ok_or_fail(any_contains(pick.lines, subject), "subject not found by search: " .. vim.inspect(pick.lines))
  local buf = wait_commit_buffer()
  ok_or_fail(buf, "no commit buffer from search")
  vim.cmd("close")
end)

T.test("show {sha} with completion", function()
  to_symbol()
  local completions = vim.fn.getcompletion("Backstory show ", "cmdline")
  extra.show_completions = completions
  ok_or_fail(#completions > 0, "no sha completions")
  local sha
  for _, e in ipairs(require("backstory").last_entries) do
    if e.commit.subject == subject then
      sha = e.commit.short_sha
    end
  end
  ok_or_fail(sha, "expected commit not among the last results")
  vim.cmd("Backstory show " .. sha)
  local buf = wait_commit_buffer()
  ok_or_fail(buf, "no commit buffer for show")
  T.eq("backstory://" .. sha:sub(1, 7), vim.api.nvim_buf_get_name(buf))
  ok_or_fail(vim.tbl_contains(vim.api.nvim_buf_get_lines(buf, 0, -1, false), diff_line), "diff line missing")
  vim.cmd("close")
end)

local function hover_at(row, col)
  vim.api.nvim_set_current_win(src_win)
  vim.api.nvim_win_set_buf(src_win, src)
  vim.api.nvim_win_set_cursor(src_win, { row, col })
  local params = vim.lsp.util.make_position_params(0, client().offset_encoding)
  local responses = vim.lsp.buf_request_sync(src, "textDocument/hover", params, timeout)
  local text = ""
  for _, r in pairs(responses or {}) do
    if r.result and r.result.contents then
      local c = r.result.contents
      text = text .. (type(c) == "table" and (c.value or vim.inspect(c)) or tostring(c))
    end
  end
  return text
end

T.test("hover: on a definition and a resolved call, never on a keyword, comment or parameter", function()
  local wrong = {}
  extra.hovers = {}
  for _, h in ipairs(vim.json.decode(env.BACKSTORY_HOVERS)) do
    local text = hover_at(h.line, h.col)
    extra.hovers[h.what] = text
    if h.expect == vim.NIL then
      if text ~= "" then
        table.insert(wrong, h.what .. ": " .. text:sub(1, 80))
      end
    elseif not text:find(h.expect, 1, true) then
      table.insert(wrong, ("%s: expected %q, got %q"):format(h.what, h.expect, text:sub(1, 80)))
    end
  end
  ok_or_fail(#wrong == 0, table.concat(wrong, "\n"))
  local text = extra.hovers["the definition"]
  ok_or_fail(not text:find("command:", 1, true), "command links in a Neovim hover")
end)

T.test("the hover's entries: :Backstory actions", function()
  to_symbol()
  want = "Open changes"
  local first = run_and_pick("Backstory actions")
  want = nil
  extra.actions = first
  T.contains(first.prompt, "Backstory: " .. symbol)
  ok_or_fail(any_contains(first.lines, subject), "the change is listed: " .. vim.inspect(first.lines))
  ok_or_fail(any_contains(first.lines, "Open changes: "), "Open changes: " .. vim.inspect(first.lines))
  ok_or_fail(any_contains(first.lines, "Show all 1 change of " .. symbol), "Show all: " .. vim.inspect(first.lines))
  ok_or_fail(any_contains(first.lines, "Find prior art for " .. symbol), "Find prior art: " .. vim.inspect(first.lines))
  -- "Open changes" was chosen: the diff view
  local wins = vim.api.nvim_tabpage_list_wins(0)
  T.eq(2, #wins)
  T.eq(true, vim.wo[wins[1]].diff)
  ok_or_fail(vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(wins[2])):match("^backstory://%x+:"), "no diff view")
  vim.cmd("tabclose")
end)

T.test("code actions offer prior art and run through vim.lsp.buf.code_action", function()
  to_symbol()
  local params = vim.lsp.util.make_range_params(0, client().offset_encoding)
  params.context = { diagnostics = {}, triggerKind = 1 }
  local responses = vim.lsp.buf_request_sync(src, "textDocument/codeAction", params, timeout)
  local titles = {}
  for _, r in pairs(responses or {}) do
    for _, a in ipairs(r.result or {}) do
      table.insert(titles, a.title)
    end
  end
  extra.code_actions = titles
  ok_or_fail(any_contains(titles, "Find prior art for"), "no 'Find prior art for' action: " .. vim.inspect(titles))
  -- Apply it the way a user would: the client-side command must open the picker.
  local before = #picks
  vim.lsp.buf.code_action({
    apply = true,
    filter = function(a)
      return a.title:find("^Find prior art for `") ~= nil
    end,
  })
  local got = vim.wait(timeout, function()
    return #picks > before
  end, 50)
  ok_or_fail(got, "applying the code action did not open the picker; messages: " .. vim.inspect(extra.notifications))
  ok_or_fail(any_contains(picks[#picks].lines, subject), "subject not offered by the code action")
  local buf = wait_commit_buffer()
  if buf then
    vim.cmd("close")
  end
end)

-- :Backstory changes on an uncommitted edit of src/log_setup.py (saved: the server reads the worktree). The
-- commit that last changed it, "Use ISO dates in log lines", was reverted 3 weeks later: its row says so, and
-- so does the commit buffer it opens.
local changes_file = env.BACKSTORY_CHANGES_FILE
local reverted = env.BACKSTORY_REVERTED
local revert_sha = env.BACKSTORY_REVERT

T.test("changes: prior art for an uncommitted edit; a reverted commit says so", function()
  vim.api.nvim_set_current_win(src_win)
  vim.cmd.edit(vim.fn.fnameescape(changes_file))
  local buf = vim.api.nvim_get_current_buf()
  local original = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local edited = vim.deepcopy(original)
  for i, l in ipairs(edited) do
    edited[i] = l:gsub("logging.basicConfig%(level=level%)", 'logging.basicConfig(level=level, format="%%(asctime)s %%(message)s", datefmt="%%Y-%%m-%%dT%%H:%%M:%%S")')
  end
  ok_or_fail(not vim.deep_equal(edited, original), "the edit did not apply: " .. vim.inspect(original))
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, edited)
  vim.cmd("silent write")
  local ok, err = pcall(function()
    want = reverted .. " · " -- the commit itself, not its revert (whose subject quotes it in quotes)
    local first = run_and_pick("Backstory changes")
    want = nil
    extra.changes = first
    T.contains(first.prompt, "prior art for your changes (1 file)")
    local row
    for _, l in ipairs(first.lines) do
      if vim.startswith(l, reverted .. " · ") then -- not the revert, whose subject quotes it
        row = l
      end
    end
    ok_or_fail(row, "the reverted commit is not offered: " .. vim.inspect(first.lines))
    T.contains(row, "reverted 3 weeks later by " .. revert_sha)
    local commit_buf = wait_commit_buffer()
    ok_or_fail(commit_buf, "no commit buffer; messages: " .. vim.inspect(extra.notifications))
    T.eq({ "Later:  reverted 3 weeks later by " .. revert_sha }, vim.b[commit_buf].backstory_fate)
    vim.cmd("close")
  end)
  want = nil
  vim.api.nvim_set_current_buf(buf)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, original)
  vim.cmd("silent write")
  if not ok then
    error(err, 0)
  end
end)

T.test("changes without uncommitted changes: the server's hint", function()
  local n = #extra.notifications
  local before = #picks
  vim.cmd("Backstory changes")
  ok_or_fail(vim.wait(timeout, function()
    return #extra.notifications > n or #picks > before
  end, 50), "no message")
  T.eq(before, #picks)
  local msg = extra.notifications[#extra.notifications]
  extra.changes_clean = msg.msg
  T.contains(msg.msg, "no uncommitted changes")
  to_symbol()
end)

T.test("status and reindex commands", function()
  to_symbol()
  local n = #extra.notifications
  vim.cmd("Backstory status")
  ok_or_fail(vim.wait(timeout, function()
    return #extra.notifications > n
  end, 50), "no status message")
  local msg = extra.notifications[#extra.notifications]
  extra.status_message = msg.msg
  ok_or_fail(msg.level ~= vim.log.levels.ERROR, "status failed: " .. msg.msg)
  T.contains(msg.msg, "indexed commits")
  n = #extra.notifications
  vim.cmd("Backstory reindex")
  ok_or_fail(vim.wait(timeout, function()
    return #extra.notifications > n
  end, 50), "no reindex message")
  msg = extra.notifications[#extra.notifications]
  extra.reindex_message = msg.msg
  T.contains(msg.msg, "indexing started")
  -- let a reindex triggered above settle before the health check
  vim.wait(timeout, function()
    local s = require("backstory.status").get(src)
    return s and s.state == "ready"
  end, 50)
end)

T.test("checkhealth backstory", function()
  to_symbol()
  vim.cmd("checkhealth backstory")
  local lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  extra.health = lines
  local oks, errors = 0, {}
  for _, l in ipairs(lines) do
    if l:match("^%s*%- ✅ OK") or l:match("^%s*%- OK") then
      oks = oks + 1
    end
    if l:match("ERROR") then
      table.insert(errors, l)
    end
  end
  ok_or_fail(oks >= 4, "expected OK lines, got:\n" .. table.concat(lines, "\n"))
  ok_or_fail(#errors == 0, "ERROR lines:\n" .. table.concat(errors, "\n"))
  T.truthy(any_contains(lines, "client "), "client line")
end)

T.test("no error messages", function()
  local errors = {}
  for _, n in ipairs(extra.notifications) do
    if n.level == vim.log.levels.ERROR then
      table.insert(errors, n.msg)
    end
  end
  ok_or_fail(#errors == 0, "error notifications: " .. vim.inspect(errors))
end)

-- Stop the server so it does not outlive nvim.
for _, c in ipairs(vim.lsp.get_clients()) do
  c:stop()
end
vim.wait(2000, function()
  return #vim.lsp.get_clients() == 0
end, 50)
extra.lsp_log = lsp_log_tail()
T.finish(extra)
