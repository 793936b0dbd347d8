--- Pure helpers for the :Backstory command: parsing, completion, server argument building.
local M = {}

M.subcommands = { "prior-art", "changes", "search", "history", "actions", "diff", "file", "show", "reindex", "status" }

M.usage = {
  ["prior-art"] = "prior-art            commits related to the symbol at the cursor (or the selection)",
  changes = "changes [{rev}]       commits like your uncommitted changes (or a commit's, a range's: A..B)",
  search = "search {text}        search the history",
  history = "history              commits that changed the symbol at the cursor",
  actions = "actions              what the hover offers: its changes, their diff, all changes, prior art",
  diff = "diff [{sha} {path}]  a commit's change to a file, side by side (in a commit: the file at the cursor)",
  file = "file [{sha} {path}]  a file as it was in a commit (in a commit: the file at the cursor)",
  show = "show {sha}           show a commit",
  reindex = "reindex              update the index (:Backstory! reindex rebuilds it)",
  status = "status               index status",
}

--- Split `:Backstory` fargs into a subcommand and the rest of the line.
--- @param fargs string[]
--- @return string|nil subcommand
--- @return string rest
function M.parse(fargs)
  local sub = fargs[1]
  local rest = table.concat(vim.list_slice(fargs, 2), " ")
  return sub, vim.trim(rest)
end

--- Completion for `:Backstory {subcommand} {arg}`.
--- @param arglead string
--- @param cmdline string
--- @param shas string[]|nil candidate commits for `show`
--- @return string[]
function M.complete(arglead, cmdline, shas)
  -- drop the command name (with optional range and bang)
  local args = cmdline:gsub("^%s*[^%a]*%a+!?%s*", "", 1)
  local words = vim.split(args, "%s+", { trimempty = true })
  local completing_first = #words == 0 or (#words == 1 and arglead ~= "")
  if completing_first then
    return vim.tbl_filter(function(s)
      return vim.startswith(s, arglead)
    end, M.subcommands)
  end
  if (words[1] == "show" or words[1] == "changes") and #words <= 2 then
    return vim.tbl_filter(function(s)
      return vim.startswith(s, arglead)
    end, shas or {})
  end
  return {}
end

local function with_optional(t, key, value)
  if value ~= nil and value ~= "" then
    t[key] = value
  end
  return t
end

--- Argument for backstory.findPriorArt / backstory.symbolHistory at a position.
--- @param uri string
--- @param position {line: integer, character: integer}
--- @param k integer|nil
function M.position_arg(uri, position, k)
  return with_optional({ uri = uri, position = { line = position.line, character = position.character } }, "k", k)
end

--- Argument for backstory.findPriorArt on a selection.
--- @param uri string
--- @param range {start: {line: integer, character: integer}, end: {line: integer, character: integer}}
--- @param k integer|nil
function M.range_arg(uri, range, k)
  return with_optional({
    uri = uri,
    range = {
      start = { line = range.start.line, character = range.start.character },
      ["end"] = { line = range["end"].line, character = range["end"].character },
    },
  }, "k", k)
end

--- Argument for backstory.search.
--- @param query string
--- @param opts? {k?: integer, uri?: string}
function M.search_arg(query, opts)
  opts = opts or {}
  local arg = { query = query }
  with_optional(arg, "k", opts.k)
  with_optional(arg, "uri", opts.uri)
  return arg
end

--- Argument for backstory.findPriorArtForChanges: the uncommitted changes (no `rev`) or a commit's / range's.
--- @param opts {uri?: string, rev?: string, k?: integer, hide_reverted?: boolean}
function M.changes_arg(opts)
  local arg = {}
  with_optional(arg, "uri", opts.uri)
  with_optional(arg, "rev", opts.rev)
  with_optional(arg, "k", opts.k)
  if opts.hide_reverted then
    arg.hideReverted = true
  end
  if next(arg) == nil then
    return vim.empty_dict()
  end
  return arg
end

--- Argument for backstory.showCommit.
function M.show_arg(sha, opts)
  opts = opts or {}
  local arg = { sha = sha }
  with_optional(arg, "path", opts.path)
  with_optional(arg, "uri", opts.uri)
  return arg
end

--- Argument for backstory.reindex.
function M.reindex_arg(rebuild, uri)
  local arg = {}
  if rebuild then
    arg.rebuild = true
  end
  with_optional(arg, "uri", uri)
  if next(arg) == nil then
    return vim.empty_dict()
  end
  return arg
end

--- Argument for backstory.status.
function M.status_arg(uri)
  if uri and uri ~= "" then
    return { uri = uri }
  end
  return vim.empty_dict()
end

--- Is `s` a plausible commit id (hex, 4-40 chars) or a revision name?
function M.is_sha(s)
  return type(s) == "string" and s:match("^%x%x%x%x+$") ~= nil and #s <= 40
end

--- The LSP range of whole lines line1..line2 (1-based, inclusive); `end_char` is the length of
--- the last line in the client's position encoding.
function M.line_range(line1, line2, end_char)
  return {
    start = { line = line1 - 1, character = 0 },
    ["end"] = { line = line2 - 1, character = end_char or 0 },
  }
end

return M
