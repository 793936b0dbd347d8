--- backstory.nvim: find prior art in a repository's git history, through the Backstory language server.
---
--- No setup() is required: enable the server with `vim.lsp.enable("backstory")` and use `:Backstory`.
local commands = require("backstory.commands")
local config = require("backstory.config")
local format = require("backstory.format")
local blsp = require("backstory.lsp")
local ui = require("backstory.ui")

local M = {}

--- Entries of the last result list (for `:Backstory show` completion and tests).
M.last_entries = {}

local function notify(msg, level)
  vim.notify("Backstory: " .. msg, level or vim.log.levels.INFO)
end

local function present(v)
  return v ~= nil and v ~= vim.NIL
end

local function buf_uri(bufnr)
  if vim.api.nvim_buf_get_name(bufnr) == "" or vim.bo[bufnr].buftype ~= "" then
    return nil
  end
  return vim.uri_from_bufnr(bufnr)
end

--- The install route (README) and the setting to set, for messages about a missing server.
M.install_fix = "Install it from the Backstory repository (run ./scripts/setup there, or pip install <path to the"
  .. ' repository>), then set vim.g.backstory = { cmd = { "<repository>/.venv/bin/backstory", "serve" } }.'

--- Why no Backstory client serves `bufnr`, in one sentence with the fix.
--- @param bufnr integer
--- @return string
function M.why_no_client(bufnr)
  local cfg = config.get()
  local enabled = vim.lsp.is_enabled and vim.lsp.is_enabled(blsp.name)
  local ok, resolved = pcall(function()
    return vim.lsp.config[blsp.name]
  end)
  local cmd = ok and type(resolved) == "table" and resolved.cmd or cfg.cmd
  local filetypes = ok and type(resolved) == "table" and resolved.filetypes or cfg.filetypes
  if not enabled and not next(blsp.exits) then
    return 'the language server is not enabled: add vim.lsp.enable("backstory") to your config (see :help backstory-lsp).'
  end
  if type(cmd) == "table" and vim.fn.executable(cmd[1]) ~= 1 then
    return ("the language server is not installed (%s is not executable). %s"):format(cmd[1], M.install_fix)
  end
  local exit = blsp.exits[#blsp.exits]
  if exit then
    return ("the language server exited (code %s); see :checkhealth backstory and :LspLog. %s"):format(
      tostring(exit.code),
      "If it cannot start, reinstall it from the Backstory repository (./scripts/setup)."
    )
  end
  local ft = vim.bo[bufnr].filetype
  if type(filetypes) == "table" and not vim.tbl_contains(filetypes, ft) then
    return ("it does not attach to %s buffers (filetypes: %s)."):format(ft ~= "" and ft or "these", table.concat(filetypes, ", "))
  end
  if vim.fs.root(bufnr, ".git") == nil then
    return "this file is not inside a git repository."
  end
  return "the language server has not attached to this buffer yet; try again in a moment (see :checkhealth backstory)."
end

local function get_client(bufnr)
  blsp.register()
  local client = blsp.client(bufnr)
  if not client then
    notify(M.why_no_client(bufnr), vim.log.levels.WARN)
  end
  return client
end

local function report_error(err)
  notify(type(err) == "table" and tostring(err.message) or tostring(err), vim.log.levels.ERROR)
end

--- A synchronous server command for `backstory://` buffers (see ui.read).
ui.request = function(command, arg, bufnr)
  local client = blsp.client(bufnr)
  if not client then
    return nil, { message = M.why_no_client(bufnr) }
  end
  local origin = buf_uri(vim.fn.bufnr("#") > 0 and vim.fn.bufnr("#") or 0)
  if origin and not arg.uri then
    arg.uri = origin
  end
  return blsp.exec_sync(client, command, arg, bufnr, config.get().timeout_ms)
end

--- Read a `backstory://` buffer (the BufReadCmd of plugin/backstory.lua).
function M.read_buffer(bufnr)
  ui.read(bufnr)
end

--- Open a commit at a hunk.
--- @param sha string
--- @param opts? {path?: string, new_start?: integer, client?: vim.lsp.Client, bufnr?: integer, fate?: string[]}
--- `fate`: header lines saying what became of the commit (format.fate_header), shown under its Date: line.
function M.show(sha, opts)
  opts = opts or {}
  if not sha or sha == "" then
    notify("usage: :Backstory show {sha}", vim.log.levels.ERROR)
    return
  end
  local bufnr = opts.bufnr or vim.api.nvim_get_current_buf()
  local client = opts.client or get_client(bufnr)
  if not client then
    return
  end
  local cfg = config.get()
  local arg = commands.show_arg(sha, { uri = buf_uri(bufnr) })
  blsp.exec(client, blsp.server_commands.show_commit, arg, bufnr, function(err, result)
    if err then
      return report_error(err)
    end
    if type(result) ~= "table" or type(result.text) ~= "string" then
      return notify("no such commit: " .. sha, vim.log.levels.WARN)
    end
    ui.show_commit(
      result,
      { sha = result.sha or sha, path = opts.path, new_start = opts.new_start, open = cfg.open, fate = opts.fate }
    )
  end)
end

--- Show a result list: the picker, and/or the quickfix list (bang or `quickfix = true`).
--- @param result table
--- @param opts {title: string, client: vim.lsp.Client, bufnr: integer, bang?: boolean}
function M.present(result, opts)
  local cfg = config.get()
  if type(result) ~= "table" then
    return notify("unexpected reply from the server", vim.log.levels.ERROR)
  end
  local entries = format.entries(result)
  M.last_entries = format.commits(entries)
  local partial = format.partial(result)
  local note = partial and (" (partial: " .. partial .. ")") or ""
  if #entries == 0 then
    local meta = type(result._meta) == "table" and result._meta or {}
    local why = present(result.message) and result.message or present(meta.hint) and meta.hint or nil
    return notify("nothing found for " .. opts.title .. (why and (" (" .. tostring(why) .. ")") or ""))
  end
  if opts.bang or cfg.quickfix then
    M.quickfix(entries, "Backstory: " .. opts.title .. note, opts.bang, opts.client, opts.bufnr)
    if opts.bang then
      return
    end
  end
  ui.pick(entries, {
    prompt = "Backstory: " .. opts.title .. note,
    note = note,
    subject_width = cfg.subject_width,
    on_choice = function(entry)
      local hunk = format.primary_hunk(entry) or {}
      M.show(entry.commit.sha, {
        path = present(hunk.path) and hunk.path or nil,
        new_start = hunk.new_start,
        client = opts.client,
        bufnr = opts.bufnr,
        fate = format.fate_header(entry),
      })
    end,
  })
end

--- Fill the quickfix list once every commit's text is fetched, so each entry points at its hunk's line.
function M.quickfix(entries, title, open, client, bufnr)
  local commits = format.commits(entries)
  local shown, pending = {}, #commits
  if pending == 0 then
    return ui.quickfix(entries, title, open, shown)
  end
  for _, e in ipairs(commits) do
    blsp.exec(client, blsp.server_commands.show_commit, { sha = e.commit.sha }, bufnr, function(err, result)
      if not err and type(result) == "table" and type(result.text) == "string" then
        shown[e.commit.sha] = result
      end
      pending = pending - 1
      if pending == 0 then
        ui.quickfix(entries, title, open, shown)
      end
    end)
  end
end

--- "prior art for Client.send", or `fallback` when the result names no symbol.
local function title_for(result, prefix, fallback)
  if type(result) == "table" and type(result.symbol) == "table" and present(result.symbol.name) then
    return prefix .. " " .. result.symbol.name
  end
  return fallback or prefix
end

--- The LSP range of a :'<,'> range, charwise when it came from a charwise visual selection.
local function selection_range(bufnr, line1, line2, encoding)
  local util = vim.lsp.util
  local s = vim.api.nvim_buf_get_mark(bufnr, "<")
  local e = vim.api.nvim_buf_get_mark(bufnr, ">")
  local last = vim.api.nvim_buf_get_lines(bufnr, line2 - 1, line2, false)[1] or ""
  if vim.fn.visualmode() == "v" and s[1] == line1 and e[1] == line2 then
    -- clamp an end past the line (`$` in visual mode) before converting to the encoding
    local end_col = math.min(e[2], math.max(#last - 1, 0))
    local params = util.make_given_range_params(s, { e[1], end_col }, bufnr, encoding)
    local max = util.character_offset(bufnr, line2 - 1, #last, encoding)
    if params.range["end"].character > max then
      params.range["end"].character = max
    end
    return params.range
  end
  return commands.line_range(line1, line2, util.character_offset(bufnr, line2 - 1, #last, encoding))
end

--- The current buffer if it is a file (prior-art and history need a source position).
local function file_buffer()
  local bufnr = vim.api.nvim_get_current_buf()
  if not buf_uri(bufnr) then
    notify("put the cursor in a source file first", vim.log.levels.WARN)
    return nil
  end
  return bufnr
end

--- Position (or selection) argument for the current buffer.
local function location_arg(client, bufnr, range_opts, k)
  local uri = vim.uri_from_bufnr(bufnr)
  local encoding = client.offset_encoding or "utf-16"
  if range_opts and range_opts.range == 2 then
    return commands.range_arg(uri, selection_range(bufnr, range_opts.line1, range_opts.line2, encoding), k)
  end
  local position = vim.lsp.util.make_position_params(0, encoding).position
  return commands.position_arg(uri, position, k)
end

local function run_prior_art(client, bufnr, arg, bang)
  blsp.exec(client, blsp.server_commands.find_prior_art, arg, bufnr, function(err, result)
    if err then
      return report_error(err)
    end
    M.present(result, {
      title = arg.range and "prior art for the selection" or title_for(result, "prior art for", "prior art at the cursor"),
      client = client,
      bufnr = bufnr,
      bang = bang,
    })
  end)
end

local function run_history(client, bufnr, arg, bang)
  blsp.exec(client, blsp.server_commands.symbol_history, arg, bufnr, function(err, result)
    if err then
      return report_error(err)
    end
    if type(result) == "table" and not present(result.symbol) and present(result.message) then
      return notify(tostring(result.message), vim.log.levels.WARN)
    end
    M.present(result, { title = title_for(result, "history of", "history"), client = client, bufnr = bufnr, bang = bang })
  end)
end

--- :Backstory prior-art — prior art for the symbol at the cursor, or the selection.
--- @param opts? {range?: integer, line1?: integer, line2?: integer, bang?: boolean}
function M.prior_art(opts)
  opts = opts or {}
  local bufnr = file_buffer()
  local client = bufnr and get_client(bufnr)
  if not client then
    return
  end
  run_prior_art(client, bufnr, location_arg(client, bufnr, opts, config.get().k), opts.bang)
end

--- :Backstory history — commits that changed the symbol at the cursor.
function M.history(opts)
  opts = opts or {}
  local bufnr = file_buffer()
  local client = bufnr and get_client(bufnr)
  if not client then
    return
  end
  run_history(client, bufnr, location_arg(client, bufnr, nil, nil), opts.bang)
end

--- :Backstory actions — what the hover at the cursor offers, as a list: each listed change (opens the commit
--- at it), "Open changes" (the newest change, side by side), "Show all N changes", "Find prior art".
function M.actions()
  local bufnr = file_buffer()
  local client = bufnr and get_client(bufnr)
  if not client then
    return
  end
  local arg = location_arg(client, bufnr, nil, nil)
  blsp.exec(client, blsp.server_commands.hover_info, arg, bufnr, function(err, info)
    if err then
      return report_error(err)
    end
    if type(info) ~= "table" or not present(info.symbol) then
      return notify("no definition here: put the cursor on a definition's name or a call to one", vim.log.levels.WARN)
    end
    local entries = M.action_entries(info, client, bufnr)
    M.last_entries = format.commits(entries)
    local partial = format.partial(info)
    ui.pick(entries, {
      prompt = "Backstory: " .. info.symbol.name .. (partial and (" (partial: " .. partial .. ")") or ""),
      subject_width = config.get().subject_width,
      on_choice = function(entry)
        local hunk = format.primary_hunk(entry) or {}
        M.show(entry.commit.sha, { path = hunk.path, new_start = hunk.new_start, client = client, bufnr = bufnr })
      end,
    })
  end)
end

--- The entries of :Backstory actions for a backstory.hoverInfo answer.
function M.action_entries(info, client, bufnr)
  local entries = {}
  for _, c in ipairs(type(info.commits) == "table" and info.commits or {}) do
    c.provenance = present(c.provenance) and c.provenance or "EXACT"
    table.insert(entries, c)
  end
  local name = info.symbol.name
  local at = { uri = info.uri, position = info.position }
  local newest = entries[1]
  if newest then
    local hunk = format.primary_hunk(newest) or {}
    local path = present(hunk.path) and hunk.path or info.symbol.path
    local old = present(hunk.old_path) and hunk.old_path ~= path and hunk.old_path or nil
    table.insert(entries, {
      action = {
        label = ("Open changes: %s in %s, side by side"):format(path, newest.commit.short_sha or newest.commit.sha:sub(1, 7)),
        run = function()
          ui.diff({ sha = newest.commit.sha, path = path, old_path = old })
        end,
      },
    })
  end
  local total = tonumber(info.total) or 0
  if total > 0 then
    table.insert(entries, {
      action = {
        label = ("Show all %d%s change%s of %s"):format(total, info.more and "+" or "", total == 1 and "" or "s", name),
        run = function()
          run_history(client, bufnr, at, false)
        end,
      },
    })
  end
  table.insert(entries, {
    action = {
      label = "Find prior art for " .. name,
      run = function()
        run_prior_art(client, bufnr, vim.tbl_extend("force", at, { k = config.get().k }), false)
      end,
    },
  })
  return entries
end

--- :Backstory diff [sha [path]] — a commit's change to a file, side by side. Without arguments in a
--- commit buffer: the file under the cursor.
function M.diff(args)
  local sha, path = (args or ""):match("^(%S+)%s+(%S+)$")
  if sha then
    return ui.diff({ sha = sha, path = path })
  end
  ui.diff_at_cursor()
end

--- :Backstory file [sha [path]] — a file as it was in a commit. Without arguments in a commit buffer: the
--- file under the cursor, at the cursor's line.
function M.file(args)
  local sha, path = (args or ""):match("^(%S+)%s+(%S+)$")
  if sha then
    return ui.show_file({ sha = sha, path = path, open = config.get().open })
  end
  ui.file_at_cursor()
end

--- :Backstory search {text}
function M.search(query, opts)
  opts = opts or {}
  if not query or query == "" then
    vim.ui.input({ prompt = "Backstory search: " }, function(input)
      if input and vim.trim(input) ~= "" then
        M.search(vim.trim(input), opts)
      end
    end)
    return
  end
  local bufnr = vim.api.nvim_get_current_buf()
  local client = get_client(bufnr)
  if not client then
    return
  end
  local cfg = config.get()
  local arg = commands.search_arg(query, { k = cfg.k, uri = buf_uri(bufnr) })
  blsp.exec(client, blsp.server_commands.search, arg, bufnr, function(err, result)
    if err then
      return report_error(err)
    end
    M.present(result, { title = "search: " .. query, client = client, bufnr = bufnr, bang = opts.bang })
  end)
end

--- :Backstory changes [REV] — prior art for the uncommitted changes of the current buffer's repository (staged
--- and unstaged, against HEAD), or for the change of a commit (REV) or range (A..B).
--- @param rev string|nil
--- @param opts? {bang?: boolean}
function M.changes(rev, opts)
  opts = opts or {}
  local bufnr = vim.api.nvim_get_current_buf()
  local client = get_client(bufnr)
  if not client then
    return
  end
  local arg = commands.changes_arg({ uri = buf_uri(bufnr), rev = rev, k = config.get().k })
  blsp.exec(client, blsp.server_commands.find_prior_art_for_changes, arg, bufnr, function(err, result)
    if err then
      return report_error(err)
    end
    local changes = type(result) == "table" and type(result.changes) == "table" and result.changes or {}
    local files = type(changes.files) == "table" and #changes.files or 0
    if type(result) == "table" and files == 0 then
      -- nothing to search: the server's hint says so ("no changes to search for: the worktree has no …")
      local meta = type(result._meta) == "table" and result._meta or {}
      local why = present(meta.hint) and tostring(meta.hint) or "there are no uncommitted changes to find prior art for"
      M.last_entries = {}
      return notify(why, vim.log.levels.WARN)
    end
    local about = present(changes.spec) and tostring(changes.spec) or "your changes"
    local title = ("prior art for %s (%d file%s)"):format(about, files, files == 1 and "" or "s")
    M.present(result, { title = title, client = client, bufnr = bufnr, bang = opts.bang })
  end)
end

--- :Backstory reindex (bang: rebuild from scratch); its end is reported when the server says so.
function M.reindex(rebuild)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = get_client(bufnr)
  if not client then
    return
  end
  local status = require("backstory.status")
  status.expect_reindex(client.id)
  local arg = commands.reindex_arg(rebuild, buf_uri(bufnr))
  blsp.exec(client, blsp.server_commands.reindex, arg, bufnr, function(err, result)
    if err then
      status.cancel_reindex(client.id)
      return report_error(err)
    end
    if type(result) == "table" and result.started then
      notify((rebuild and "rebuilding the index" or "reindexing started") .. "; you will be told when it is done")
    else
      status.cancel_reindex(client.id)
      if type(result) == "table" and present(result.message) then
        notify(tostring(result.message))
      else
        notify("reindex: " .. vim.inspect(result))
      end
    end
  end)
end

--- Status from the CLI (`backstory status --json` in the current directory), for when no client runs.
--- @param cwd string|nil
--- @param timeout_ms integer|nil
--- @return table|nil status, string|nil error
function M.cli_status(cwd, timeout_ms)
  local cfg = config.get()
  local cmd = M.cli_command(cfg.cmd, { "status", "--json" })
  if vim.fn.executable(cmd[1]) ~= 1 then
    return nil, cmd[1] .. " is not executable"
  end
  local ok, res = pcall(function()
    return vim.system(cmd, { cwd = cwd or vim.fn.getcwd(), text = true }):wait(timeout_ms or cfg.timeout_ms)
  end)
  if not ok then
    return nil, tostring(res)
  end
  local decoded_ok, decoded = pcall(vim.json.decode, res.stdout or "", { luanil = { object = true, array = true } })
  if decoded_ok and type(decoded) == "table" then
    return decoded, nil
  end
  return nil, vim.trim((res.stderr or "") .. (res.stdout or "")) .. (" (exit %s)"):format(tostring(res.code))
end

--- The CLI command for a subcommand, derived from the server command: everything before "serve".
--- {"backstory", "serve"} + {"--version"} -> {"backstory", "--version"}
--- @param server_cmd string[]
--- @param args string[]
--- @return string[]
function M.cli_command(server_cmd, args)
  local out = {}
  for _, part in ipairs(server_cmd) do
    if part == "serve" then
      break
    end
    table.insert(out, part)
  end
  if #out == 0 then
    out = { "backstory" }
  end
  vim.list_extend(out, args)
  return out
end

--- :Backstory status
function M.status()
  local bufnr = vim.api.nvim_get_current_buf()
  blsp.register()
  local client = blsp.client(bufnr)
  local last = require("backstory.status").get(bufnr)
  if not client then
    local why = M.why_no_client(bufnr)
    local st, err = M.cli_status()
    if st then
      return notify("no language server (" .. why .. ")\n" .. format.status_summary(st))
    end
    return notify(why .. " (`backstory status` failed too: " .. tostring(err) .. ")", vim.log.levels.WARN)
  end
  blsp.exec(client, blsp.server_commands.status, commands.status_arg(buf_uri(bufnr)), bufnr, function(err, result)
    if err then
      return report_error(err)
    end
    local text = format.status_summary(result)
    local has_state = type(result) == "table"
      and (present(result.state) or (type(result.server) == "table" and present(result.server.state)))
    if last and not has_state then
      text = text .. "\n  " .. format.status_text(last)
    end
    vim.notify(text, vim.log.levels.INFO)
  end)
end

--- Run a client-side command carried by a code action or hover link (backstory.ui.*).
--- @param ui_command string
--- @param command lsp.Command
--- @param ctx table {client_id, bufnr}
function M.run_ui_command(ui_command, command, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id) or blsp.client(ctx.bufnr)
  local arg = type(command.arguments) == "table" and command.arguments[1] or nil
  if not client or type(arg) ~= "table" then
    return notify("cannot run " .. tostring(command.command), vim.log.levels.ERROR)
  end
  local bufnr = ctx.bufnr or vim.api.nvim_get_current_buf()
  if ui_command == "backstory.ui.symbolHistory" then
    return run_history(client, bufnr, arg, false)
  elseif ui_command == "backstory.ui.findPriorArt" then
    return run_prior_art(client, bufnr, arg, false)
  elseif ui_command == "backstory.ui.openCommit" then
    return M.show(arg.sha, { path = arg.path, new_start = arg.newStart, client = client, bufnr = bufnr })
  elseif ui_command == "backstory.ui.openChanges" then
    return ui.diff({ sha = arg.sha, path = arg.path, old_path = arg.oldPath })
  end
  notify("unknown command " .. tostring(command.command), vim.log.levels.ERROR)
end

local function short_shas()
  local out = {}
  for _, e in ipairs(M.last_entries) do
    if type(e.commit) == "table" and present(e.commit.short_sha) then
      table.insert(out, e.commit.short_sha)
    end
  end
  return out
end

--- Completion for :Backstory.
function M.complete(arglead, cmdline, _)
  return commands.complete(arglead, cmdline, short_shas())
end

--- Entry point of :Backstory.
--- @param opts table user-command callback opts (fargs, bang, range, line1, line2)
function M.run(opts)
  local sub, rest = commands.parse(opts.fargs or {})
  if sub == "prior-art" then
    M.prior_art(opts)
  elseif sub == "changes" then
    M.changes(rest ~= "" and rest or nil, opts)
  elseif sub == "search" then
    M.search(rest, opts)
  elseif sub == "history" then
    M.history(opts)
  elseif sub == "actions" then
    M.actions()
  elseif sub == "diff" then
    M.diff(rest)
  elseif sub == "file" then
    M.file(rest)
  elseif sub == "show" then
    M.show(rest)
  elseif sub == "reindex" then
    M.reindex(opts.bang)
  elseif sub == "status" then
    M.status()
  else
    local lines = { (sub and ("unknown subcommand %q; "):format(sub) or "") .. "usage: :Backstory[!] {subcommand}" }
    for _, name in ipairs(commands.subcommands) do
      table.insert(lines, "  " .. commands.usage[name])
    end
    notify(table.concat(lines, "\n"), sub and vim.log.levels.ERROR or vim.log.levels.INFO)
  end
end

--- A short string for 'statusline', e.g. "Backstory: indexing history 120/5,000 commits" or "Backstory: ready".
--- @param bufnr integer|nil
--- @return string
function M.statusline(bufnr)
  return require("backstory.status").statusline(bufnr)
end

return M
