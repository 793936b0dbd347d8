-- Unit tests of the pure helpers and of the plugin's wiring (no language server).
-- Run: nvim --headless -u NONE -i NONE --cmd "set rtp+=clients/neovim" -l tests/nvim/unit.lua
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)")
local T = dofile(here .. "harness.lua")

local format = require("backstory.format")
local commands = require("backstory.commands")
local config = require("backstory.config")

local NOW = 1795169472 -- 2026-11-20T10:11:12Z

local function entry(over)
  local e = {
    provenance = "INFERRED",
    score = 0.03,
    commit = {
      sha = "9f1c2ab0000000000000000000000000000000000",
      short_sha = "9f1c2ab",
      subject = "Add retry with backoff",
      body = "",
      author = { name = "Ada", email = "ada@example.com" },
      date = "2026-11-17T10:11:12+00:00",
      commit_date = "2026-11-17T10:11:12+00:00",
    },
    why = { lanes = { diff = 2, message = 1, path = vim.NIL, symbol = 4 }, fused = 0.06, rerank = vim.NIL },
    hunks = {
      {
        path = "src/http.py",
        old_path = "src/http.py",
        change = "modify",
        old_start = 10,
        old_lines = 3,
        new_start = 10,
        new_lines = 12,
      },
    },
  }
  return vim.tbl_deep_extend("force", e, over or {})
end

-- dates ----------------------------------------------------------------------------------------

T.test("parse_iso8601", function()
  T.eq(1795169472, format.parse_iso8601("2026-11-20T10:11:12+00:00"))
  T.eq(1795169472, format.parse_iso8601("2026-11-20T10:11:12Z"))
  T.eq(1795169472, format.parse_iso8601("2026-11-20T10:11:12.123456+00:00"))
  T.eq(1795169472, format.parse_iso8601("2026-11-20T12:11:12+02:00"))
  T.eq(1795169472, format.parse_iso8601("2026-11-20T12:11:12+0200"))
  T.eq(920260800, format.parse_iso8601("1999-02-28T23:00:00-05:00"))
  T.eq(1709164800, format.parse_iso8601("2024-02-29"))
  T.eq(nil, format.parse_iso8601("yesterday"))
  T.eq(nil, format.parse_iso8601(nil))
end)

T.test("relative_date", function()
  -- the table the server (views/age.py) and the VS Code client are tested with
  local table_file = vim.fn.fnamemodify(here .. "../data/ages.json", ":p")
  local data = vim.json.decode(table.concat(vim.fn.readfile(table_file), "\n"))
  local now = format.parse_iso8601(data.now)
  local wrong = {}
  for _, c in ipairs(data.cases) do
    local got = format.relative_date(c.date, now)
    if got ~= c.expected then
      table.insert(wrong, ("%s: expected %s, got %s"):format(c.date, c.expected, got))
    end
  end
  T.truthy(#data.cases > 20, "the shared table has cases")
  T.eq({}, wrong)
  T.eq("garbage", format.relative_date("garbage", NOW))
end)

-- items ----------------------------------------------------------------------------------------

T.test("hunk_location", function()
  T.eq("src/http.py:10-21", format.hunk_location(entry().hunks[1]))
  T.eq("a.py:5", format.hunk_location({ path = "a.py", new_start = 5, new_lines = 1 }))
  T.eq("a.py:5", format.hunk_location({ path = "a.py", new_start = 5, new_lines = 0 }))
  T.eq(
    "old.py:3-4",
    format.hunk_location({ path = "old.py", old_path = "old.py", change = "delete", old_start = 3, old_lines = 2, new_start = 0, new_lines = 0 })
  )
  T.eq("b.py:1-2", format.hunk_location({ path = "b.py", change = "add", new_start = 0, new_lines = 2 }))
  T.eq("", format.hunk_location(nil))
end)

T.test("why", function()
  -- the server's reason, in words, with the lines it changed; never lane ranks or scores
  T.eq("src/http.py:10-21", format.why(entry()))
  T.eq("similar change in src/http.py (lines 10-21)", format.why(entry({ reason = "similar change in src/http.py" })))
  T.eq("message matches your words · src/http.py:10-21", format.why(entry({ reason = "message matches your words" })))
  T.eq("similar code in this file (lines 10-21)", format.why(entry({ reason = "similar code in this file" })))
  T.eq("", format.why({ commit = {} }))
  T.eq("same function", format.why({ reason = "same function" }))
end)

T.test("item", function()
  T.eq(
    "Add retry with backoff · 9f1c2ab Ada, 3 days ago · similar change in src/http.py (lines 10-21)",
    format.item(entry({ reason = "similar change in src/http.py" }), { now = NOW })
  )
  local long = entry({ commit = { subject = "Retry every request with exponential backoff and jitter" } })
  T.eq("Retry every request with…", format.item(long, { now = NOW, subject_width = 26 }):match("^[^·]+"):gsub("%s+$", ""))
  -- missing fields do not crash
  T.eq("(no subject) · abcdef1", format.item({ commit = { sha = "abcdef1234" }, hunks = {} }, { now = NOW }))
  T.eq("History of f: 2 changes…", format.item({ group = { label = "History of f: 2 changes…" } }))
  T.eq(nil, format.item(entry(), { now = NOW }):find("`", 1, true))
end)

T.test("consequences and twins", function()
  -- the table the server (views/consequences.py) and the VS Code client are tested with
  local table_file = vim.fn.fnamemodify(here .. "../data/consequences.json", ":p")
  local data = vim.json.decode(table.concat(vim.fn.readfile(table_file), "\n"))
  local wrong = {}
  for _, c in ipairs(data.cases) do
    local got = format.consequences(c.consequences)
    if got ~= c.expected then
      table.insert(wrong, ("expected %q, got %q"):format(c.expected, got))
    end
  end
  T.truthy(#data.cases > 5, "the shared table has cases")
  T.eq({}, wrong)
  local reverted = { kind = "reverted", by = { sha = "1a2b3c4000", short_sha = "1a2b3c4" }, after_days = 21 }
  local e = entry({ reason = "similar change in src/http.py", consequences = { reverted }, twins = { { sha = "5d6e7f8000" } } })
  T.eq(
    "Add retry with backoff · 9f1c2ab Ada, 3 days ago · similar change in src/http.py (lines 10-21)"
      .. " · reverted 3 weeks later by 1a2b3c4; the same change also as 5d6e7f8",
    format.item(e, { now = NOW })
  )
  T.eq({ "Later:  reverted 3 weeks later by 1a2b3c4", "Same:   the same change also as 5d6e7f8" }, format.fate_header(e))
  T.eq({}, format.fate_header(entry()))
  T.eq("", format.fate(entry({ consequences = {}, twins = {} })))
  T.contains(format.qf_items({ e }, { now = NOW })[1].text, "reverted 3 weeks later by 1a2b3c4")
end)

T.test("entries: prior art first, the exact history as one group", function()
  local a = entry({ commit = { sha = "a", short_sha = "a" } })
  local b = entry({ commit = { sha = "b", short_sha = "b" } })
  a.provenance = nil
  local result = { symbol = { name = "f" }, exact = { a }, results = { entry({ commit = { sha = "a" } }), b } }
  local es = format.entries(result)
  T.eq(2, #es)
  T.eq("b", es[1].commit.sha)
  T.eq("History of f", es[2].group.title)
  T.eq("History of f: 1 change…", es[2].group.label)
  T.eq("a", es[2].group.entries[1].commit.sha)
  T.eq("EXACT", es[2].group.entries[1].provenance)
  T.eq({ "b", "a" }, vim.tbl_map(function(e)
    return e.commit.sha
  end, format.commits(es)))
end)

T.test("entries: exact as a symbol-history object, history, search", function()
  local a = entry({ commit = { sha = "a" }, provenance = "EXACT" })
  local b = entry({ commit = { sha = "b" } })
  T.eq(2, #format.entries({ exact = { symbol = {}, commits = { a } }, results = { b } }))
  T.eq(1, #format.entries({ symbol = {}, commits = { a } }))
  T.eq(1, #format.entries({ results = { b } }))
  T.eq(0, #format.entries({ results = {} }))
  T.eq(0, #format.entries(nil))
  T.eq(0, #format.entries({ exact = vim.NIL, results = vim.NIL }))
end)

T.test("partial", function()
  T.eq("indexing history 1,000/1,522 commits: results are partial until it finishes",
    format.partial({ _meta = { partial = true, hint = "indexing history 1,000/1,522 commits: results are partial until it finishes" } }))
  T.eq(nil, format.partial({ _meta = { partial = false, hint = "x" } }))
  T.eq(nil, format.partial({}))
end)

T.test("qf_items", function()
  local items = format.qf_items({ entry({ reason = "similar change in src/http.py" }) }, { now = NOW })
  T.eq(1, #items)
  -- the commit view at the hunk, never a working-tree file
  T.eq("backstory://9f1c2ab", items[1].filename)
  T.eq("9f1c2ab", items[1].module)
  T.eq("\\V\\^@@ -10,3 +10,12 @@", items[1].pattern)
  T.eq("Add retry with backoff · Ada, 3 days ago · similar change in src/http.py (lines 10-21)", items[1].text)
  T.eq(1, items[1].valid)
  local nohunk = format.qf_items({ entry({ hunks = {} }) })
  T.eq("backstory://9f1c2ab", nohunk[1].filename)
  T.eq(1, nohunk[1].lnum)
  T.eq("\\V\\^@@ -3 +0,0 @@", format.hunk_pattern({ old_start = 3, old_lines = 1, new_start = 0, new_lines = 0 }))
end)

T.test("buffer names", function()
  T.eq("backstory://9f1c2ab", format.buffer_name("9f1c2ab0000"))
  T.eq("backstory://9f1c2ab:src/a.py", format.buffer_name("9f1c2ab0000", "src/a.py"))
  T.eq("backstory://9f1c2ab^:src/a.py", format.buffer_name("9f1c2ab0000", "src/a.py", true))
  T.eq({ "9f1c2ab^", "src/a.py" }, { format.parse_buffer_name("backstory://9f1c2ab^:src/a.py") })
  T.eq({ "9f1c2ab", nil }, { format.parse_buffer_name("backstory://9f1c2ab") })
  T.eq({ nil, nil }, { format.parse_buffer_name("/tmp/x.py") })
end)

T.test("hunk_line", function()
  local hunks = {
    { path = "a.py", new_start = 1, line = 7 },
    { path = "b.py", new_start = 3, line = 20 },
    { path = "b.py", new_start = 40, line = 31 },
  }
  T.eq(20, format.hunk_line(hunks, "b.py", nil))
  T.eq(31, format.hunk_line(hunks, "b.py", 40))
  T.eq(7, format.hunk_line(hunks, "c.py", nil))
  T.eq(nil, format.hunk_line({}, "a.py"))
  T.eq(nil, format.hunk_line(nil))
end)

T.test("status_text", function()
  T.eq("Backstory: indexing history 1,000/1,522 commits", format.status_text({ state = "indexing", phase = "history", done = 1000, total = 1522 }))
  T.eq("Backstory: embedding 512/4,635 files", format.status_text({ state = "indexing", phase = "dense", done = 512, total = 4635 }))
  T.eq("Backstory: indexing history…", format.status_text({ state = "indexing" }))
  T.eq("Backstory: ready", format.status_text({ state = "ready" }))
  T.eq("Backstory: 3 commits behind", format.status_text({ state = "ready", commits_behind_head = 3 }))
  T.eq("Backstory: starting", format.status_text({ state = "starting" }))
  T.eq("Backstory: error", format.status_text({ state = "error", message = "boom" }))
  T.eq("Backstory: no repository", format.status_text({ state = "no-repo" }))
  T.eq("", format.status_text(nil))
end)

T.test("status_summary", function()
  local s = format.status_summary({
    repo = "/r",
    index = { indexed_commits = 12, commits_behind_head = 0, dense_coverage = 1.0, indexed_at = "2026-11-22T03:00:00+00:00" },
  })
  T.contains(s, "repository: /r")
  T.contains(s, "indexed commits: 12 (0 behind HEAD)")
  T.contains(s, "dense coverage: 100%")
  T.contains(format.status_summary({ indexed_commits = 3, hint = "run backstory index" }), "hint: run backstory index")
  T.eq(nil, format.status_summary({ indexed_commits = 3, hint = vim.NIL }):find("hint", 1, true))
  -- the server adds its own state under "server"
  T.contains(format.status_summary({ index = { indexed_commits = 3 }, server = { state = "ready" } }), "state: ready")
  T.contains(
    format.status_summary({ index = {}, server = { state = "indexing", message = "Indexing history 1/5 commits" } }),
    "state: indexing (Indexing history 1/5 commits)"
  )
end)

-- commands -------------------------------------------------------------------------------------

T.test("parse", function()
  T.eq({ "search", "retry with backoff" }, { commands.parse({ "search", "retry", "with", "backoff" }) })
  T.eq({ "prior-art", "" }, { commands.parse({ "prior-art" }) })
  T.eq({ nil, "" }, { commands.parse({}) })
end)

T.test("complete", function()
  T.eq(commands.subcommands, commands.complete("", "Backstory ", {}))
  T.eq({ "changes" }, commands.complete("c", "Backstory c", {}))
  T.eq({ "abc1234" }, commands.complete("a", "Backstory changes a", { "abc1234" }))
  T.eq({ "search", "show", "status" }, commands.complete("s", "Backstory s", {}))
  T.eq({ "diff" }, commands.complete("d", "Backstory d", {}))
  T.eq({ "prior-art" }, commands.complete("p", "'<,'>Backstory! p", {}))
  T.eq({ "abc1234", "abd0000" }, commands.complete("", "Backstory show ", { "abc1234", "abd0000" }))
  T.eq({ "abc1234" }, commands.complete("abc", "Backstory show abc", { "abc1234", "abd0000" }))
  T.eq({}, commands.complete("", "Backstory search foo ", { "abc1234" }))
end)

T.test("argument building", function()
  local uri = "file:///repo/a.py"
  T.eq({ uri = uri, position = { line = 3, character = 4 } }, commands.position_arg(uri, { line = 3, character = 4 }))
  T.eq({ uri = uri, position = { line = 3, character = 4 }, k = 5 }, commands.position_arg(uri, { line = 3, character = 4 }, 5))
  local range = { start = { line = 1, character = 0 }, ["end"] = { line = 4, character = 7 } }
  T.eq({ uri = uri, range = range }, commands.range_arg(uri, range))
  T.eq({ query = "retry", k = 3, uri = uri }, commands.search_arg("retry", { k = 3, uri = uri }))
  T.eq({ query = "retry" }, commands.search_arg("retry"))
  T.eq({ sha = "abc" }, commands.show_arg("abc"))
  T.eq({ sha = "abc", path = "a.py", uri = uri }, commands.show_arg("abc", { path = "a.py", uri = uri }))
  T.eq({ rebuild = true, uri = uri }, commands.reindex_arg(true, uri))
  T.eq("{}", vim.json.encode(commands.reindex_arg(false, nil)))
  T.eq("{}", vim.json.encode(commands.status_arg(nil)))
  T.eq({ uri = uri }, commands.status_arg(uri))
  T.eq("{}", vim.json.encode(commands.changes_arg({})))
  T.eq({ uri = uri, rev = "HEAD~2..HEAD", k = 5, hideReverted = true }, commands.changes_arg({ uri = uri, rev = "HEAD~2..HEAD", k = 5, hide_reverted = true }))
  T.eq({ uri = uri }, commands.changes_arg({ uri = uri, rev = "" }))
  T.eq({ start = { line = 0, character = 0 }, ["end"] = { line = 2, character = 9 } }, commands.line_range(1, 3, 9))
  -- the executeCommand params carry ONE object argument
  local blsp = require("backstory.lsp")
  T.eq(
    { arguments = { { query = "x" } }, command = "backstory.search" },
    vim.json.decode(vim.json.encode(blsp.params("backstory.search", { query = "x" })))
  )
  T.truthy(commands.is_sha("9f1c2ab"))
  T.eq(false, commands.is_sha("HEAD~1"))
end)

T.test("cli_command", function()
  local bs = require("backstory")
  T.eq({ "backstory", "--version" }, bs.cli_command({ "backstory", "serve" }, { "--version" }))
  T.eq({ "/x/python", "-m", "backstory", "status", "--json" }, bs.cli_command({ "/x/python", "-m", "backstory", "serve", "--stdio" }, { "status", "--json" }))
end)

-- config ---------------------------------------------------------------------------------------

T.test("config defaults", function()
  local cfg, errors = config.resolve(nil)
  T.eq({}, errors)
  T.eq({ "backstory", "serve" }, cfg.cmd)
  T.eq(false, cfg.quickfix)
  T.eq("split", cfg.open)
  T.eq(config.filetypes, cfg.filetypes)
  T.eq("{}", vim.json.encode(config.server_options(cfg)))
end)

T.test("config valid values and pass-through", function()
  local cfg, errors = config.resolve({ cmd = { "/bin/backstory", "serve" }, k = 5, rerank = false, hover = true, hover_max = 1, quickfix = true, open = "tab", dense = false, recencyWeight = 0.1 })
  T.eq({}, errors)
  T.eq({ "/bin/backstory", "serve" }, cfg.cmd)
  T.eq({ k = 5, rerank = false, hover = true, hover_max = 1, dense = false, recencyWeight = 0.1 }, config.server_options(cfg))
  T.eq("cross-encoder", config.resolve({ reranker = "cross-encoder" }).reranker)
  T.eq({ second_stage = "blend" }, config.server_options(config.resolve({ second_stage = "blend" })))
  T.eq({ "*.lock" }, config.resolve({ exclude = { "*.lock" } }).exclude)
end)

T.test("config invalid values fall back to defaults", function()
  local cfg, errors = config.resolve({ k = 0, cmd = "backstory serve", open = "float", rerank = "maxsim", hover = "yes", hover_max = 0, quickfix = 1, reranker = "bm25", exclude = "*.lock", second_stage = "rrf" })
  T.eq(10, #errors, vim.inspect(errors))
  T.eq(nil, cfg.k)
  T.eq({ "backstory", "serve" }, cfg.cmd)
  T.eq("split", cfg.open)
  T.eq(nil, cfg.rerank)
  T.eq(nil, cfg.hover)
  T.eq(false, cfg.quickfix)
  local all = table.concat(errors, "\n")
  T.contains(all, "vim.g.backstory.k")
  T.contains(all, "vim.g.backstory.open")
  T.contains(all, "vim.g.backstory.second_stage")
  local _, errs2 = config.resolve("nope")
  T.eq(1, #errs2)
  local _, errs3 = config.resolve({ k = 2.5 })
  T.eq(1, #errs3)
end)

T.test("config errors are reported once", function()
  local notes = {}
  local orig = vim.notify
  vim.notify = function(msg, level)
    table.insert(notes, { msg = msg, level = level })
  end
  vim.g.backstory = { k = "ten" }
  config.get()
  config.get()
  vim.g.backstory = { k = "ten", open = "x" }
  config.get()
  vim.notify = orig
  vim.g.backstory = nil
  T.eq(2, #notes, vim.inspect(notes))
  T.contains(notes[1].msg, "vim.g.backstory.k")
  T.eq(vim.log.levels.WARN, notes[1].level)
  T.contains(notes[2].msg, "vim.g.backstory.open")
  T.eq(nil, notes[2].msg:find("vim.g.backstory.k", 1, true))
end)

-- wiring ---------------------------------------------------------------------------------------

T.test("lsp/backstory.lua resolves through vim.lsp.config", function()
  vim.g.backstory = { cmd = { "/opt/bin/backstory", "serve" }, k = 7, hover_max = 2, quickfix = true }
  local c = vim.lsp.config["backstory"]
  T.eq({ "/opt/bin/backstory", "serve" }, c.cmd)
  T.eq({ ".git" }, c.root_markers)
  T.eq(config.filetypes, c.filetypes)
  T.eq({ k = 7, hover_max = 2 }, c.init_options)
  T.eq({ backstory = { k = 7, hover_max = 2 } }, c.settings)
  T.truthy(type(c.handlers["backstory/status"]) == "function", "status handler")
  T.truthy(vim.lsp.commands["backstory.ui.findPriorArt"], "ui.findPriorArt registered")
  T.truthy(vim.lsp.commands["backstory.ui.symbolHistory"], "ui.symbolHistory registered")
  -- user overrides through vim.lsp.config win (lists are replaced, not merged)
  vim.lsp.config("backstory", { cmd = { "python", "-m", "backstory.cli", "serve" }, init_options = { k = 3 } })
  c = vim.lsp.config["backstory"]
  T.eq({ "python", "-m", "backstory.cli", "serve" }, c.cmd)
  T.eq(3, c.init_options.k)
  T.eq(2, c.init_options.hover_max)
  vim.g.backstory = nil
end)

local COMMIT_TEXT = table.concat({
  "commit 9f1c2ab000",
  "Author: Ada <ada@example.com>",
  "",
  "    Add retry",
  "",
  "diff --git a/a.py b/a.py",
  "--- a/a.py",
  "+++ b/a.py",
  "@@ -1,2 +1,3 @@ def f():",
  " x",
  "+y",
  "diff --git a/old.py b/b.py",
  "@@ -10,2 +10,3 @@",
  " p",
  "-q",
  "+z",
}, "\n") .. "\n"

T.test("ui.show_commit buffer", function()
  local ui = require("backstory.ui")
  local buf = ui.show_commit({
    sha = "9f1c2ab000",
    title = "Add retry",
    text = COMMIT_TEXT,
    hunks = { { path = "a.py", new_start = 1, line = 8 }, { path = "b.py", new_start = 10, line = 12 } },
  }, { sha = "9f1c2ab000", path = "b.py", new_start = 10, open = "split" })
  T.eq(buf, vim.api.nvim_get_current_buf())
  T.eq("backstory://9f1c2ab", vim.api.nvim_buf_get_name(buf))
  T.eq("nofile", vim.bo[buf].buftype)
  T.eq("hide", vim.bo[buf].bufhidden) -- quickfix entries keep pointing at it
  T.eq(false, vim.bo[buf].modifiable)
  T.eq("git", vim.bo[buf].filetype)
  T.eq(16, vim.api.nvim_buf_line_count(buf))
  T.eq({ 13, 0 }, vim.api.nvim_win_get_cursor(0))
  T.eq("@@ -10,2 +10,3 @@", vim.api.nvim_get_current_line())
  T.eq(2, #vim.api.nvim_list_wins())
  -- the file and line under the cursor, for gd (diff) and gf (file at the revision)
  vim.api.nvim_win_set_cursor(0, { 16, 0 })
  T.eq({ sha = "9f1c2ab000", path = "b.py", old_path = "old.py", line = 11 }, ui.file_under_cursor())
  vim.api.nvim_win_set_cursor(0, { 15, 0 })
  T.eq(nil, ui.file_under_cursor().line) -- a removed line
  vim.api.nvim_win_set_cursor(0, { 11, 0 })
  T.eq({ sha = "9f1c2ab000", path = "a.py", old_path = "a.py", line = 2 }, ui.file_under_cursor())
  T.truthy(vim.fn.maparg("gd", "n", false, true).buffer == 1, "gd mapped in the commit buffer")
  -- showing the same commit again reuses the window and the buffer
  local buf2 = ui.show_commit(nil, { sha = "9f1c2ab000", open = "split" })
  T.eq(2, #vim.api.nvim_list_wins())
  T.eq(buf, buf2)
  -- what became of the commit: virtual lines under its header; the text and the hunks' lines stay
  ui.show_commit(nil, { sha = "9f1c2ab000", open = "split", fate = { "Later:  reverted 3 weeks later by 1a2b3c4" } })
  local marks = vim.api.nvim_buf_get_extmarks(buf, -1, 0, -1, { details = true })
  local virt = {}
  for _, m in ipairs(marks) do
    for _, vl in ipairs(m[4].virt_lines or {}) do
      table.insert(virt, { row = m[2], text = vl[1][1] })
    end
  end
  T.eq({ { row = 0, text = "Later:  reverted 3 weeks later by 1a2b3c4" } }, virt)
  T.eq({ "Later:  reverted 3 weeks later by 1a2b3c4" }, vim.b[buf].backstory_fate)
  T.eq(16, vim.api.nvim_buf_line_count(buf))
  ui.set_fate(buf, {})
  T.eq({}, vim.api.nvim_buf_get_extmarks(buf, -1, 0, -1, {}))
  vim.cmd("close")
end)

T.test("ui.quickfix", function()
  local ui = require("backstory.ui")
  ui.quickfix({ entry() }, "Backstory: prior art", false)
  local qf = vim.fn.getqflist({ title = 1, items = 1 })
  T.eq("Backstory: prior art", qf.title)
  T.eq(1, #qf.items)
  T.eq("backstory://9f1c2ab", vim.api.nvim_buf_get_name(qf.items[1].bufnr))
  T.eq("\\V\\^@@ -10,3 +10,12 @@", qf.items[1].pattern)
  T.eq("9f1c2ab", qf.items[1].module)
  -- with the commit's text at hand: its buffer is filled and the entry points at the hunk's line
  local sha = entry().commit.sha
  ui.quickfix({ entry() }, "Backstory: prior art", false, {
    [sha] = { sha = sha, text = COMMIT_TEXT, hunks = { { path = "src/http.py", new_start = 10, line = 12 } } },
  })
  qf = vim.fn.getqflist({ items = 1 })
  T.eq(13, qf.items[1].lnum)
  T.eq("", qf.items[1].pattern)
  local b = qf.items[1].bufnr
  T.eq("@@ -10,2 +10,3 @@", vim.api.nvim_buf_get_lines(b, 12, 13, false)[1])
  vim.cmd("silent cc 1")
  T.eq(b, vim.api.nvim_get_current_buf())
  T.eq(13, vim.api.nvim_win_get_cursor(0)[1])
  vim.cmd("bwipe!")
end)

T.test("ui.pick formats items through vim.ui.select; a group opens a second list", function()
  local ui = require("backstory.ui")
  local seen, chosen = {}, nil
  local orig = vim.ui.select
  vim.ui.select = function(items, opts, on_choice)
    table.insert(seen, { prompt = opts.prompt, kind = opts.kind, lines = vim.tbl_map(opts.format_item, items) })
    on_choice(items[#items], #items)
  end
  local entries = format.entries({ symbol = { name = "f" }, exact = { entry({ commit = { sha = "e", short_sha = "e" } }) }, results = { entry() } })
  ui.pick(entries, { prompt = "Backstory: prior art for f", on_choice = function(e)
    chosen = e
  end })
  vim.ui.select = orig
  T.eq(2, #seen)
  T.eq("Backstory: prior art for f", seen[1].prompt)
  T.eq("backstory", seen[1].kind)
  T.contains(seen[1].lines[1], "Add retry with backoff · 9f1c2ab Ada, ")
  T.eq("History of f: 1 change…", seen[1].lines[2])
  T.eq("Backstory: history of f", seen[2].prompt)
  T.eq("e", chosen.commit.sha)
end)

T.test(":Backstory without a server warns instead of failing", function()
  vim.cmd("runtime! plugin/backstory.lua")
  local notes = {}
  local orig = vim.notify
  vim.notify = function(msg, level)
    table.insert(notes, { msg = msg, level = level })
  end
  vim.cmd("Backstory prior-art") -- scratch buffer: not a file
  vim.cmd("edit " .. vim.fn.tempname() .. ".py")
  vim.cmd("Backstory prior-art")
  vim.cmd("Backstory frobnicate")
  vim.notify = orig
  T.eq(3, #notes, vim.inspect(notes))
  T.contains(notes[1].msg, "source file")
  T.contains(notes[2].msg, 'the language server is not enabled: add vim.lsp.enable("backstory")')
  T.contains(notes[3].msg, 'unknown subcommand "frobnicate"')
  T.eq(vim.log.levels.ERROR, notes[3].level)
end)

T.test("an enabled server that is not installed: one message naming the fix, not \"not enabled\"", function()
  vim.cmd("filetype on")
  vim.g.backstory = { cmd = { "/nonexistent/bin/backstory", "serve" } }
  vim.lsp.config("backstory", { cmd = { "/nonexistent/bin/backstory", "serve" } })
  vim.lsp.enable("backstory")
  local dir = vim.fn.tempname()
  vim.fn.mkdir(dir .. "/.git", "p")
  local notes = {}
  local orig = vim.notify
  vim.notify = function(msg, level)
    table.insert(notes, { msg = msg, level = level })
  end
  vim.cmd("edit " .. dir .. "/x.py") -- FileType: the plugin says once that the server is missing
  vim.cmd("Backstory prior-art")
  vim.cmd("edit " .. dir .. "/y.py")
  vim.notify = orig
  vim.lsp.enable("backstory", false)
  vim.g.backstory = nil
  T.eq(2, #notes, vim.inspect(notes))
  for _, n in ipairs(notes) do
    T.contains(n.msg, "/nonexistent/bin/backstory is not executable")
    T.contains(n.msg, "./scripts/setup")
    T.contains(n.msg, "pip install <path to the")
    T.contains(n.msg, "vim.g.backstory = { cmd = ")
    T.eq(nil, n.msg:find("not enabled", 1, true))
  end
  T.eq(vim.log.levels.ERROR, notes[1].level)
end)

T.test("a server that starts and exits: one message, and :Backstory says it exited", function()
  vim.cmd("filetype on")
  local dir = vim.fn.tempname()
  vim.fn.mkdir(dir .. "/.git", "p")
  vim.fn.writefile({ "#!/bin/sh", "echo 'backstory: broken install' >&2", "exit 3" }, dir .. "/backstory")
  vim.fn.setfperm(dir .. "/backstory", "rwxr-xr-x")
  vim.lsp.config("backstory", { cmd = { dir .. "/backstory", "serve" } })
  vim.lsp.enable("backstory")
  local notes = {}
  local orig = vim.notify
  vim.notify = function(msg, level)
    table.insert(notes, { msg = msg, level = level })
  end
  vim.cmd("edit " .. dir .. "/x.py")
  vim.wait(5000, function()
    return #require("backstory.lsp").exits > 0
  end, 20)
  vim.wait(200, function()
    return false
  end, 20)
  vim.cmd("Backstory prior-art")
  vim.notify = orig
  vim.lsp.enable("backstory", false)
  local msgs = vim.tbl_map(function(n)
    return n.msg
  end, notes)
  T.truthy(#require("backstory.lsp").exits > 0, "the exit was recorded")
  local said = table.concat(msgs, "\n")
  T.contains(said, "the language server exited (code 3)")
  T.contains(said, "./scripts/setup")
  T.eq(nil, said:find("not enabled", 1, true))
end)

T.finish()
