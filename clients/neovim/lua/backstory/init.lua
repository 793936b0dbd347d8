--- backstory.nvim: find prior art in a repository's git history, through the Backstory language server.
---
--- No setup() is required: enable the server with `vim.lsp.enable("backstory")` and use `:Backstory`.
local commands = require("backstory.commands")
local config = require("backstory.config")
local format = require("backstory.format")
local blsp = require("backstory.lsp")

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

local function get_client(bufnr)
  blsp.register()
  local client = blsp.client(bufnr)
  if not client then
    notify(
      'no Backstory language server is running for this buffer; enable it with vim.lsp.enable("backstory")'
        .. " (see :checkhealth backstory)",
      vim.log.levels.WARN
    )
  end
  return client
end

local function report_error(err)
  notify(type(err) == "table" and tostring(err.message) or tostring(err), vim.log.levels.ERROR)
end

--- Open a commit in a scratch buffer.
--- @param sha string
--- @param opts? {path?: string, new_start?: integer, client?: vim.lsp.Client, bufnr?: integer}
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
    require("backstory.ui").show_commit(result, { path = opts.path, new_start = opts.new_start, open = cfg.open })
  end)
end

--- Show a result list: quickfix (bang or `quickfix = true`) and/or the picker.
--- @param result table
--- @param opts {title: string, client: vim.lsp.Client, bufnr: integer, bang?: boolean}
function M.present(result, opts)
  local cfg = config.get()
  if type(result) ~= "table" then
    return notify("unexpected reply from the server", vim.log.levels.ERROR)
  end
  local entries = format.entries(result)
  M.last_entries = entries
  if #entries == 0 then
    local meta = type(result._meta) == "table" and result._meta or {}
    local why = present(result.message) and result.message or present(meta.hint) and meta.hint or nil
    return notify("nothing found for " .. opts.title .. (why and (" (" .. tostring(why) .. ")") or ""))
  end
  local ui = require("backstory.ui")
  local root = type(result._meta) == "table" and present(result._meta.repo) and result._meta.repo
    or opts.client.root_dir
  if opts.bang or cfg.quickfix then
    ui.quickfix(entries, "Backstory: " .. opts.title, root, opts.bang)
    if opts.bang then
      return
    end
  end
  ui.pick(entries, {
    prompt = "Backstory: " .. opts.title,
    subject_width = cfg.subject_width,
    on_choice = function(entry)
      local hunk = type(entry.hunks) == "table" and entry.hunks[1] or {}
      M.show(entry.commit.sha, {
        path = present(hunk.path) and hunk.path or nil,
        new_start = hunk.new_start,
        client = opts.client,
        bufnr = opts.bufnr,
      })
    end,
  })
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

--- :Backstory prior-art — prior art for the symbol at the cursor, or the selection.
--- @param opts? {range?: integer, line1?: integer, line2?: integer, bang?: boolean}
function M.prior_art(opts)
  opts = opts or {}
  local bufnr = file_buffer()
  local client = bufnr and get_client(bufnr)
  if not client then
    return
  end
  local cfg = config.get()
  local arg = location_arg(client, bufnr, opts, cfg.k)
  blsp.exec(client, blsp.server_commands.find_prior_art, arg, bufnr, function(err, result)
    if err then
      return report_error(err)
    end
    M.present(result, {
      title = arg.range and "prior art for the selection" or title_for(result, "prior art for", "prior art at the cursor"),
      client = client,
      bufnr = bufnr,
      bang = opts.bang,
    })
  end)
end

--- :Backstory history — commits that changed the symbol at the cursor.
function M.history(opts)
  opts = opts or {}
  local bufnr = file_buffer()
  local client = bufnr and get_client(bufnr)
  if not client then
    return
  end
  local arg = location_arg(client, bufnr, nil, nil)
  blsp.exec(client, blsp.server_commands.symbol_history, arg, bufnr, function(err, result)
    if err then
      return report_error(err)
    end
    if type(result) == "table" and not present(result.symbol) and present(result.message) then
      return notify(tostring(result.message), vim.log.levels.WARN)
    end
    M.present(result, { title = title_for(result, "history of", "history"), client = client, bufnr = bufnr, bang = opts.bang })
  end)
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

--- :Backstory reindex (bang: rebuild from scratch)
function M.reindex(rebuild)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = get_client(bufnr)
  if not client then
    return
  end
  local arg = commands.reindex_arg(rebuild, buf_uri(bufnr))
  blsp.exec(client, blsp.server_commands.reindex, arg, bufnr, function(err, result)
    if err then
      return report_error(err)
    end
    if type(result) == "table" and result.started then
      notify(rebuild and "rebuilding the index" or "indexing started")
    elseif type(result) == "table" and present(result.message) then
      notify(tostring(result.message))
    else
      notify("reindex: " .. vim.inspect(result))
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
    local st, err = M.cli_status()
    if st then
      return notify("(no language server running)\n" .. format.status_summary(st))
    end
    return notify("no language server running and `backstory status` failed: " .. tostring(err), vim.log.levels.WARN)
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

--- Run a client-side command carried by a code action (backstory.ui.*).
--- @param server_command string
--- @param command lsp.Command
--- @param ctx table {client_id, bufnr}
function M.run_ui_command(server_command, command, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id) or blsp.client(ctx.bufnr)
  local arg = type(command.arguments) == "table" and command.arguments[1] or nil
  if not client or type(arg) ~= "table" then
    return notify("cannot run " .. tostring(command.command), vim.log.levels.ERROR)
  end
  local bufnr = ctx.bufnr or vim.api.nvim_get_current_buf()
  blsp.exec(client, server_command, arg, bufnr, function(err, result)
    if err then
      return report_error(err)
    end
    local title
    if server_command == blsp.server_commands.symbol_history then
      if type(result) == "table" and not present(result.symbol) and present(result.message) then
        return notify(tostring(result.message), vim.log.levels.WARN)
      end
      title = title_for(result, "history of", "history")
    else
      title = arg.range and "prior art for the selection" or title_for(result, "prior art for", "prior art at the cursor")
    end
    M.present(result, { title = title, client = client, bufnr = bufnr })
  end)
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
  elseif sub == "search" then
    M.search(rest, opts)
  elseif sub == "history" then
    M.history(opts)
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

--- A short string for 'statusline', e.g. "Backstory: indexing 120/5000" or "Backstory: ready".
--- @param bufnr integer|nil
--- @return string
function M.statusline(bufnr)
  return require("backstory.status").statusline(bufnr)
end

return M
