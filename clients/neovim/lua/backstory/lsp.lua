--- LSP plumbing: find the Backstory client, run server commands, register client-side commands.
local M = {}

M.name = "backstory"

--- Server commands the client calls (docs/protocol.md).
M.server_commands = {
  find_prior_art = "backstory.findPriorArt",
  search = "backstory.search",
  symbol_history = "backstory.symbolHistory",
  show_commit = "backstory.showCommit",
  file_at_revision = "backstory.fileAtRevision",
  hover_info = "backstory.hoverInfo",
  reindex = "backstory.reindex",
  status = "backstory.status",
  find_prior_art_for_changes = "backstory.findPriorArtForChanges",
}

--- Client-side commands carried by the server's code actions and hover links (see docs/protocol.md), each with
--- the server command it calls.
M.ui_commands = {
  ["backstory.ui.findPriorArt"] = "backstory.findPriorArt",
  ["backstory.ui.symbolHistory"] = "backstory.symbolHistory",
  ["backstory.ui.openCommit"] = "backstory.showCommit",
  ["backstory.ui.openChanges"] = "backstory.fileAtRevision",
}

--- Exits of Backstory clients that did not stop cleanly: {code, signal, client_id}, oldest first.
M.exits = {}

local function is_backstory(client)
  if client.name == M.name then
    return true
  end
  local provider = client.server_capabilities and client.server_capabilities.executeCommandProvider
  local commands = type(provider) == "table" and provider.commands or {}
  return vim.list_contains(commands, M.server_commands.find_prior_art)
end

--- The Backstory client for a buffer: one attached to it, else any running Backstory client.
--- @param bufnr integer|nil
--- @return vim.lsp.Client|nil
function M.client(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  for _, client in ipairs(vim.lsp.get_clients({ bufnr = bufnr })) do
    if is_backstory(client) then
      return client
    end
  end
  for _, client in ipairs(vim.lsp.get_clients()) do
    if is_backstory(client) then
      return client
    end
  end
  return nil
end

--- All running Backstory clients.
--- @return vim.lsp.Client[]
function M.clients()
  return vim.tbl_filter(is_backstory, vim.lsp.get_clients())
end

--- The executeCommand params for a server command with its single object argument.
--- @param command string
--- @param argument table
--- @return table
function M.params(command, argument)
  return { command = command, arguments = { argument } }
end

--- Run a server command asynchronously.
--- @param client vim.lsp.Client
--- @param command string e.g. "backstory.findPriorArt"
--- @param argument table the command's single object argument
--- @param bufnr integer|nil
--- @param callback fun(err: table|nil, result: any)
function M.exec(client, command, argument, bufnr, callback)
  local ok = client:request("workspace/executeCommand", M.params(command, argument), function(err, result)
    vim.schedule(function()
      callback(err, result)
    end)
  end, bufnr)
  if not ok then
    vim.schedule(function()
      callback({ code = -32803, message = "the Backstory language server is not running" }, nil)
    end)
  end
end

--- Run a server command synchronously.
--- @return any result, table|nil err
function M.exec_sync(client, command, argument, bufnr, timeout_ms)
  local response, err = client:request_sync("workspace/executeCommand", M.params(command, argument), timeout_ms, bufnr)
  if not response then
    return nil, { message = err or "no response" }
  end
  if response.err then
    return nil, response.err
  end
  return response.result, nil
end

--- Register the client-side commands that the server's code actions carry, so that
--- vim.lsp.buf.code_action() can run them. Idempotent.
function M.register()
  for ui_command in pairs(M.ui_commands) do
    if not vim.lsp.commands[ui_command] then
      vim.lsp.commands[ui_command] = function(command, ctx)
        require("backstory").run_ui_command(ui_command, command, ctx)
      end
    end
  end
end

--- on_exit of the LSP config: remember a server that stopped on its own and say so once, with the fix.
function M.on_exit(code, signal, client_id)
  if code == 0 and (signal == 0 or signal == nil) then
    return
  end
  table.insert(M.exits, { code = code, signal = signal, client_id = client_id })
  if #M.exits == 1 then
    vim.schedule(function()
      vim.notify(
        ("Backstory: the language server exited (code %s); see :checkhealth backstory and :LspLog. If it cannot"
          .. " start, reinstall it from the Backstory repository (./scripts/setup)."):format(tostring(code)),
        vim.log.levels.ERROR
      )
    end)
  end
end

--- Handlers installed in the LSP config.
M.handlers = {
  ["backstory/status"] = function(err, result, ctx)
    require("backstory.status").on_status(err, result, ctx)
  end,
}

return M
