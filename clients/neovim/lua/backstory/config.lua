--- Configuration for backstory.nvim.
---
--- Sources, lowest precedence first:
---   1. the defaults below,
---   2. `vim.g.backstory` (a table),
---   3. `vim.lsp.config("backstory", {...})` for the LSP fields (cmd, filetypes, init_options, ...).
---
--- Invalid values are reported once with vim.notify and replaced by their default.
local M = {}

M.filetypes = {
  "python",
  "javascript",
  "javascriptreact",
  "typescript",
  "typescriptreact",
  "rust",
  "go",
  "java",
  "c",
  "cpp",
  "ruby",
}

--- Keys used by the client only; every other key is passed to the server.
M.client_keys = {
  cmd = true,
  filetypes = true,
  quickfix = true,
  open = true,
  subject_width = true,
  timeout_ms = true,
}

M.defaults = {
  cmd = { "backstory", "serve" },
  filetypes = M.filetypes,
  quickfix = false, -- also send result lists to the quickfix list
  open = "split", -- how to open a commit: "split" | "vsplit" | "tab" | "current"
  subject_width = 60, -- truncate subjects in the picker to this many characters (0 = never)
  timeout_ms = 10000, -- for synchronous requests (:checkhealth)
  -- Server options (passed through as initializationOptions and settings.backstory).
  -- nil means "the server's default".
  k = nil, -- number of results (server default 10)
  rerank = nil, -- second-stage reranking (server default true)
  reranker = nil, -- "maxsim" | "cross-encoder" | "none" (server default "maxsim")
  second_stage = nil, -- "learned" | "blend": how reranked candidates are ordered (server default "learned")
  hover = nil, -- show past changes on hover (server default true)
  hover_max = nil, -- commits listed in a hover (server default 3)
  dense = nil, -- dense (embedding) lane (server default true)
  all_branches = nil, -- index and search every local branch, not only HEAD's history (server default false)
  exclude = nil, -- glob patterns of paths to leave out of the index
}

local OPEN_VALUES = { split = true, vsplit = true, tab = true, current = true }

local function is_list_of_strings(v)
  if type(v) ~= "table" or #v == 0 then
    return false
  end
  for i, s in pairs(v) do
    if type(i) ~= "number" or type(s) ~= "string" then
      return false
    end
  end
  return true
end

local function is_positive_int(v)
  return type(v) == "number" and v >= 1 and math.floor(v) == v
end

local function is_non_negative_int(v)
  return type(v) == "number" and v >= 0 and math.floor(v) == v
end

--- Validators: key -> { validator (type name or function), message }.
M.validators = {
  cmd = { is_list_of_strings, "a non-empty list of strings, e.g. { 'backstory', 'serve' }" },
  filetypes = { is_list_of_strings, "a non-empty list of filetypes" },
  quickfix = { "boolean" },
  open = {
    function(v)
      return OPEN_VALUES[v] == true
    end,
    'one of "split", "vsplit", "tab", "current"',
  },
  subject_width = { is_non_negative_int, "a non-negative integer" },
  timeout_ms = { is_positive_int, "a positive integer (milliseconds)" },
  k = { is_positive_int, "a positive integer" },
  rerank = { "boolean" },
  reranker = {
    function(v)
      return v == "maxsim" or v == "cross-encoder" or v == "none"
    end,
    'one of "maxsim", "cross-encoder", "none"',
  },
  second_stage = {
    function(v)
      return v == "learned" or v == "blend"
    end,
    'one of "learned", "blend"',
  },
  hover = { "boolean" },
  hover_max = { is_positive_int, "a positive integer" },
  dense = { "boolean" },
  all_branches = { "boolean" },
  exclude = {
    function(v)
      return type(v) == "table" and (next(v) == nil or is_list_of_strings(v))
    end,
    "a list of glob patterns",
  },
}

local reported = {}

--- Validate a user table. Pure apart from vim.validate.
--- @param user table|nil
--- @return table cfg merged with defaults (invalid values replaced by defaults)
--- @return string[] errors
function M.resolve(user)
  local errors = {}
  local cfg = vim.deepcopy(M.defaults)
  if user == nil then
    return cfg, errors
  end
  if type(user) ~= "table" then
    table.insert(errors, ("vim.g.backstory: expected a table, got %s"):format(type(user)))
    return cfg, errors
  end
  local keys = vim.tbl_keys(user)
  table.sort(keys, function(a, b)
    return tostring(a) < tostring(b)
  end)
  for _, key in ipairs(keys) do
    local value = user[key]
    if value == vim.NIL then
      value = nil
    end
    local spec = M.validators[key]
    if type(key) ~= "string" then
      table.insert(errors, ("vim.g.backstory: ignoring non-string key %s"):format(vim.inspect(key)))
    elseif spec and value ~= nil then
      local ok, err = pcall(vim.validate, "vim.g.backstory." .. key, value, spec[1], false, spec[2])
      if ok then
        cfg[key] = vim.deepcopy(value)
      else
        table.insert(errors, (tostring(err):gsub("^[^:]*:%d+: ", "")))
      end
    else
      cfg[key] = vim.deepcopy(value)
    end
  end
  return cfg, errors
end

--- Options the server receives (initializationOptions, settings.backstory).
--- @param cfg table a resolved config
--- @return table
function M.server_options(cfg)
  local out = {}
  for key, value in pairs(cfg) do
    if not M.client_keys[key] and value ~= nil then
      out[key] = value
    end
  end
  if next(out) == nil then
    return vim.empty_dict()
  end
  return out
end

--- Report each distinct error once per session.
--- @param errors string[]
function M.report(errors)
  local fresh = {}
  for _, e in ipairs(errors) do
    if not reported[e] then
      reported[e] = true
      table.insert(fresh, e)
    end
  end
  if #fresh > 0 then
    vim.notify(
      "backstory: invalid configuration (using defaults for these):\n" .. table.concat(fresh, "\n"),
      vim.log.levels.WARN
    )
  end
end

--- The current configuration: defaults + vim.g.backstory, validated; errors reported once.
--- @return table cfg
--- @return string[] errors
function M.get()
  local cfg, errors = M.resolve(vim.g.backstory)
  M.report(errors)
  return cfg, errors
end

return M
