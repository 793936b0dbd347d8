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
  local function at(seconds_ago)
    return os.date("!%Y-%m-%dT%H:%M:%S+00:00", NOW - seconds_ago)
  end
  T.eq("just now", format.relative_date(at(5), NOW))
  T.eq("just now", format.relative_date(at(-30), NOW)) -- small clock skew
  T.eq("1 minute ago", format.relative_date(at(60), NOW))
  T.eq("59 minutes ago", format.relative_date(at(3599), NOW))
  T.eq("1 hour ago", format.relative_date(at(3600), NOW))
  T.eq("23 hours ago", format.relative_date(at(86399), NOW))
  T.eq("1 day ago", format.relative_date(at(86400), NOW))
  T.eq("3 days ago", format.relative_date(at(3 * 86400), NOW))
  T.eq("1 week ago", format.relative_date(at(7 * 86400), NOW))
  T.eq("4 weeks ago", format.relative_date(at(29 * 86400), NOW))
  T.eq("1 month ago", format.relative_date(at(30 * 86400), NOW))
  T.eq("11 months ago", format.relative_date(at(340 * 86400), NOW))
  T.eq("1 year ago", format.relative_date(at(366 * 86400), NOW))
  T.eq("6 years ago", format.relative_date("2020-11-20T10:11:12+00:00", NOW))
  T.eq("2027-01-01", format.relative_date("2027-01-01T00:00:00+00:00", NOW)) -- future: the date
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
  T.eq("[message,diff,symbol]", format.why(entry()))
  T.eq("[exact]", format.why(entry({ provenance = "EXACT" })))
  T.eq("", format.why({ commit = {} }))
  T.eq("[diff,path]", format.why({ why = { lanes = { path = 1, diff = 1 } } }))
end)

T.test("item", function()
  T.eq(
    "Add retry with backoff  9f1c2ab  Ada  3 days ago  src/http.py:10-21  [message,diff,symbol]",
    format.item(entry(), { now = NOW })
  )
  local e = entry({ provenance = "EXACT" })
  table.insert(e.hunks, { path = "src/b.py", new_start = 1, new_lines = 1 })
  T.eq("Add retry with backoff  9f1c2ab  Ada  3 days ago  src/http.py:10-21 +1  [exact]", format.item(e, { now = NOW }))
  local long = entry({ commit = { subject = string.rep("x", 80) } })
  local s = format.item(long, { now = NOW, subject_width = 10 })
  T.eq(string.rep("x", 9) .. "…  9f1c2ab", s:sub(1, #string.rep("x", 9) + #"…  9f1c2ab"))
  -- missing fields do not crash
  T.eq("(no subject)  abcdef1", format.item({ commit = { sha = "abcdef1234" }, hunks = {} }, { now = NOW }))
end)

T.test("entries: prior-art (exact list + results, de-duplicated)", function()
  local a = entry({ commit = { sha = "a", short_sha = "a" } })
  local b = entry({ commit = { sha = "b", short_sha = "b" } })
  a.provenance = nil
  local result = { exact = { a }, results = { entry({ commit = { sha = "a" } }), b } }
  local es = format.entries(result)
  T.eq(2, #es)
  T.eq("a", es[1].commit.sha)
  T.eq("EXACT", es[1].provenance)
  T.eq("b", es[2].commit.sha)
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

T.test("qf_items", function()
  local items = format.qf_items({ entry() }, "/repo/", { now = NOW })
  T.eq(1, #items)
  T.eq("/repo/src/http.py", items[1].filename)
  T.eq(10, items[1].lnum)
  T.eq("9f1c2ab  Add retry with backoff  Ada  3 days ago [message,diff,symbol]", items[1].text)
  T.eq(1, items[1].valid)
  local nohunk = format.qf_items({ entry({ hunks = {} }) }, "/repo")
  T.eq(nil, nohunk[1].filename)
  T.eq(0, nohunk[1].valid)
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
  T.eq("Backstory: indexing 120/5000", format.status_text({ state = "indexing", phase = "history", done = 120, total = 5000 }))
  T.eq("Backstory: indexing dense 3/10", format.status_text({ state = "indexing", phase = "dense", done = 3, total = 10 }))
  T.eq("Backstory: indexing", format.status_text({ state = "indexing" }))
  T.eq("Backstory: ready", format.status_text({ state = "ready" }))
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
  T.eq({ "search", "show", "status" }, commands.complete("s", "Backstory s", {}))
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

T.test("ui.show_commit scratch buffer", function()
  local ui = require("backstory.ui")
  local text = table.concat({
    "commit 9f1c2ab000",
    "Author: Ada <ada@example.com>",
    "",
    "    Add retry",
    "",
    "diff --git a/a.py b/a.py",
    "--- a/a.py",
    "+++ b/a.py",
    "@@ -1,2 +1,3 @@",
    " x",
    "+y",
    "diff --git a/b.py b/b.py",
    "@@ -10,2 +10,3 @@",
    "+z",
  }, "\n") .. "\n"
  local buf = ui.show_commit({
    sha = "9f1c2ab000",
    title = "Add retry",
    text = text,
    hunks = { { path = "a.py", new_start = 1, line = 8 }, { path = "b.py", new_start = 10, line = 12 } },
  }, { path = "b.py", open = "split" })
  T.eq(buf, vim.api.nvim_get_current_buf())
  T.eq("backstory://9f1c2ab", vim.api.nvim_buf_get_name(buf))
  T.eq("nofile", vim.bo[buf].buftype)
  T.eq("wipe", vim.bo[buf].bufhidden)
  T.eq(false, vim.bo[buf].modifiable)
  T.eq("diff", vim.bo[buf].filetype)
  T.eq(14, vim.api.nvim_buf_line_count(buf))
  T.eq({ 13, 0 }, vim.api.nvim_win_get_cursor(0))
  T.eq("@@ -10,2 +10,3 @@", vim.api.nvim_get_current_line())
  T.eq(2, #vim.api.nvim_list_wins())
  -- showing the same commit again reuses the window and the name
  local buf2 = ui.show_commit({ sha = "9f1c2ab000", text = text, hunks = {} }, { open = "split" })
  T.eq(2, #vim.api.nvim_list_wins())
  T.eq(false, vim.api.nvim_buf_is_valid(buf))
  T.eq("backstory://9f1c2ab", vim.api.nvim_buf_get_name(buf2))
  vim.cmd("close")
  T.eq(false, vim.api.nvim_buf_is_valid(buf2)) -- bufhidden=wipe
end)

T.test("ui.quickfix", function()
  local ui = require("backstory.ui")
  ui.quickfix({ entry() }, "Backstory: prior art", "/repo", false)
  local qf = vim.fn.getqflist({ title = 1, items = 1 })
  T.eq("Backstory: prior art", qf.title)
  T.eq(1, #qf.items)
  T.eq(10, qf.items[1].lnum)
  T.eq("/repo/src/http.py", vim.api.nvim_buf_get_name(qf.items[1].bufnr))
end)

T.test("ui.pick formats items through vim.ui.select", function()
  local ui = require("backstory.ui")
  local seen, chosen
  local orig = vim.ui.select
  vim.ui.select = function(items, opts, on_choice)
    seen = { prompt = opts.prompt, kind = opts.kind, lines = vim.tbl_map(opts.format_item, items) }
    on_choice(items[1], 1)
  end
  ui.pick({ entry() }, { prompt = "Backstory: x", on_choice = function(e)
    chosen = e
  end })
  vim.ui.select = orig
  T.eq("Backstory: x", seen.prompt)
  T.eq("backstory", seen.kind)
  T.contains(seen.lines[1], "Add retry with backoff  9f1c2ab  Ada  ")
  T.contains(seen.lines[1], "  src/http.py:10-21  [message,diff,symbol]")
  T.eq("9f1c2ab", chosen.commit.short_sha)
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
  T.contains(notes[2].msg, 'vim.lsp.enable("backstory")')
  T.contains(notes[3].msg, 'unknown subcommand "frobnicate"')
  T.eq(vim.log.levels.ERROR, notes[3].level)
end)

T.finish()
