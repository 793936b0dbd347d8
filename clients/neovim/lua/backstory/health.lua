--- :checkhealth backstory
local M = {}

local function present(v)
  return v ~= nil and v ~= vim.NIL
end

--- The server command as it will be started: vim.lsp.config (if resolvable) over vim.g.backstory.
local function server_cmd(cfg)
  local ok, resolved = pcall(function()
    return vim.lsp.config["backstory"]
  end)
  if ok and type(resolved) == "table" and type(resolved.cmd) == "table" then
    return resolved.cmd, "vim.lsp.config"
  end
  if ok and type(resolved) == "table" and type(resolved.cmd) == "function" then
    return cfg.cmd, "vim.g.backstory (vim.lsp.config has a cmd function)"
  end
  return cfg.cmd, "vim.g.backstory"
end

local function report_index(h, st, source)
  local fmt = require("backstory.format")
  if type(st) ~= "table" then
    h.warn("index status (" .. source .. "): unexpected reply " .. vim.inspect(st))
    return
  end
  local idx = type(st.index) == "table" and st.index or st
  local hint = st.hint
  if not present(hint) and type(st._meta) == "table" then
    hint = st._meta.hint
  end
  local summary = fmt.status_summary(st):gsub("^Backstory\n  ", ""):gsub("\n  ", "; ")
  local state = st.state
  if not present(state) and type(st.server) == "table" then
    state = st.server.state
  end
  if state == "error" then
    h.error("index (" .. source .. "): " .. summary)
  elseif present(idx.indexed_commits) and tonumber(idx.indexed_commits) and tonumber(idx.indexed_commits) > 0 then
    local behind = tonumber(idx.commits_behind_head) or 0
    if behind > 0 then
      h.warn("index (" .. source .. "): " .. summary, { "Run :Backstory reindex, or wait for the server to catch up." })
    else
      h.ok("index (" .. source .. "): " .. summary)
    end
  else
    h.warn(
      "index (" .. source .. "): " .. summary,
      present(hint) and { tostring(hint) } or { "Open a file of the repository with the server enabled, or run `backstory index`." }
    )
  end
end

function M.check()
  local h = vim.health
  h.start("backstory: Neovim")
  if vim.fn.has("nvim-0.11") == 1 then
    local v = vim.version()
    h.ok(("Neovim %d.%d.%d"):format(v.major, v.minor, v.patch))
  else
    h.error("Neovim >= 0.11 is required (vim.lsp.config / vim.lsp.enable)")
  end

  h.start("backstory: configuration")
  local config = require("backstory.config")
  local cfg, errors = config.resolve(vim.g.backstory)
  if #errors == 0 then
    h.ok("vim.g.backstory is valid" .. (vim.g.backstory == nil and " (not set: defaults)" or ""))
  else
    for _, e in ipairs(errors) do
      h.warn(e, { "The default is used instead; see :help backstory-config" })
    end
  end

  h.start("backstory: server executable")
  local cmd, source = server_cmd(cfg)
  local exe = cmd[1]
  if vim.fn.executable(exe) == 1 then
    h.ok(("`%s` is executable (%s, from %s)"):format(exe, vim.fn.exepath(exe), source))
    local version_cmd = require("backstory").cli_command(cmd, { "--version" })
    local ok, res = pcall(function()
      return vim.system(version_cmd, { text = true }):wait(cfg.timeout_ms)
    end)
    if ok and res.code == 0 then
      h.ok(("`%s`: %s"):format(table.concat(version_cmd, " "), vim.trim(res.stdout ~= "" and res.stdout or res.stderr)))
    else
      h.warn(
        ("`%s` failed: %s"):format(
          table.concat(version_cmd, " "),
          ok and vim.trim((res.stderr or "") .. (res.stdout or "")) or tostring(res)
        )
      )
    end
  else
    h.error(("`%s` is not executable (cmd from %s)"):format(exe, source), {
      "Install Backstory from its repository: run ./scripts/setup there (or pip install <path to the repository>),",
      'then set vim.g.backstory = { cmd = { "<repository>/.venv/bin/backstory", "serve" } }.',
    })
  end

  h.start("backstory: language server")
  if vim.lsp.is_enabled and vim.lsp.is_enabled("backstory") then
    h.ok('vim.lsp.enable("backstory") is set')
  else
    h.info('The "backstory" config is not enabled; add vim.lsp.enable("backstory") to your config.')
  end
  local clients = require("backstory.lsp").clients()
  local cur = vim.api.nvim_get_current_buf()
  for _, exit in ipairs(require("backstory.lsp").exits) do
    h.error(("The language server exited with code %s (signal %s)"):format(tostring(exit.code), tostring(exit.signal)), {
      "See :LspLog for what it printed; reinstall it from the Backstory repository (./scripts/setup) if it cannot start.",
    })
  end
  if #clients == 0 then
    h.warn("No Backstory client is running: " .. require("backstory").why_no_client(cur))
  end
  for _, client in ipairs(clients) do
    local bufs = vim.tbl_keys(client.attached_buffers or {})
    table.sort(bufs)
    h.ok(
      ("client %d (%s) running, root %s, attached to %d buffer(s)"):format(
        client.id,
        client.name,
        tostring(client.root_dir),
        #bufs
      )
    )
    local last = require("backstory.status").by_client[client.id]
    if last then
      local text = require("backstory.format").status_text(last)
      if last.state == "error" then
        h.error("last backstory/status: " .. text .. (present(last.message) and (" — " .. last.message) or ""))
      else
        h.ok("last backstory/status: " .. text)
      end
    end
  end

  h.start("backstory: index")
  if #clients > 0 then
    local client = clients[1]
    local result, err = require("backstory.lsp").exec_sync(
      client,
      "backstory.status",
      vim.empty_dict(),
      client.attached_buffers and next(client.attached_buffers) or cur,
      cfg.timeout_ms
    )
    if err then
      h.warn("backstory.status failed: " .. tostring(err.message))
    else
      report_index(h, result, "language server")
    end
  else
    local st, err = require("backstory").cli_status(vim.fn.getcwd(), cfg.timeout_ms)
    if st then
      report_index(h, st, "`backstory status --json` in " .. vim.fn.getcwd())
    else
      h.warn("`backstory status --json` failed: " .. tostring(err))
    end
  end
end

return M
