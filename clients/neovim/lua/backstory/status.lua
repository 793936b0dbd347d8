--- Tracks the `backstory/status` notification per client.
local format = require("backstory.format")

local M = {}

--- client_id -> last status payload
M.by_client = {}

--- client_id -> "asked" | "running": a reindex the user asked for, whose end is reported
M.reindexing = {}

--- Called before asking the server to reindex: its end (the first ready/error after indexing) is reported.
function M.expect_reindex(client_id)
  local last = M.by_client[client_id]
  M.reindexing[client_id] = (last and last.state == "indexing") and "running" or "asked"
end

function M.cancel_reindex(client_id)
  M.reindexing[client_id] = nil
end

local function report_reindex(client_id, result)
  local pending = M.reindexing[client_id]
  if result.state == "indexing" and pending == "asked" then
    M.reindexing[client_id] = "running"
  elseif (result.state == "ready" or result.state == "error") and pending == "running" then
    M.reindexing[client_id] = nil
    local msg
    if result.state == "error" then
      msg = "Backstory: reindexing failed: " .. tostring(result.message)
    else
      local what = type(result.message) == "string" and result.message:gsub("commit%(s%)", "new commit(s)") or "done"
      local n = tonumber(result.indexed_commits)
      msg = "Backstory: reindexing finished: " .. what .. (n and ("; " .. format.thousands(n) .. " commits indexed") or "")
    end
    vim.schedule(function()
      vim.notify(msg, result.state == "error" and vim.log.levels.WARN or vim.log.levels.INFO)
    end)
  end
end

--- Handler for the `backstory/status` notification (server -> client).
--- Stores the payload, fires `User BackstoryStatus` and redraws status lines.
function M.on_status(err, result, ctx)
  if err or type(result) ~= "table" or not ctx then
    return
  end
  M.by_client[ctx.client_id] = result
  report_reindex(ctx.client_id, result)
  vim.schedule(function()
    pcall(vim.api.nvim_exec_autocmds, "User", {
      pattern = "BackstoryStatus",
      modeline = false,
      data = { client_id = ctx.client_id, status = result },
    })
    pcall(vim.cmd.redrawstatus, { bang = true })
  end)
end

--- Forget statuses of clients that have exited.
local function prune()
  for id in pairs(M.by_client) do
    if not vim.lsp.get_client_by_id(id) then
      M.by_client[id] = nil
    end
  end
end

--- The last status for the backstory client of a buffer (or of any backstory client).
--- @param bufnr integer|nil
--- @return table|nil status
--- @return integer|nil client_id
function M.get(bufnr)
  if next(M.by_client) == nil then
    return nil, nil -- cheap path for statuslines before any server has spoken
  end
  prune()
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  for _, client in ipairs(vim.lsp.get_clients({ bufnr = bufnr })) do
    if M.by_client[client.id] then
      return M.by_client[client.id], client.id
    end
  end
  local ids = vim.tbl_keys(M.by_client)
  table.sort(ids)
  if ids[1] then
    return M.by_client[ids[1]], ids[1]
  end
  return nil, nil
end

--- A short string for 'statusline': "Backstory: indexing 120/5000", "Backstory: ready", or "".
--- @param bufnr integer|nil
--- @return string
function M.statusline(bufnr)
  local status = M.get(bufnr)
  return format.status_text(status)
end

return M
