--- Presentation: picker (vim.ui.select), quickfix list, commit scratch buffer.
local format = require("backstory.format")

local M = {}

--- Show entries with vim.ui.select.
--- @param entries table[]
--- @param opts {prompt: string, subject_width?: integer, on_choice: fun(entry: table|nil, idx: integer|nil)}
function M.pick(entries, opts)
  local now = os.time()
  vim.ui.select(entries, {
    prompt = opts.prompt,
    kind = "backstory",
    format_item = function(entry)
      return format.item(entry, { now = now, subject_width = opts.subject_width })
    end,
  }, function(choice, idx)
    if choice then
      opts.on_choice(choice, idx)
    end
  end)
end

--- Replace the quickfix list with entries.
--- @param entries table[]
--- @param title string
--- @param root string|nil
--- @param open boolean open the quickfix window
function M.quickfix(entries, title, root, open)
  vim.fn.setqflist({}, " ", {
    title = title,
    items = format.qf_items(entries, root),
    context = { backstory = true },
  })
  if open then
    vim.cmd("botright copen")
  end
end

local OPEN = {
  split = "belowright split",
  vsplit = "belowright vsplit",
  tab = "tab split",
}

--- Open a showCommit result in a read-only scratch buffer (filetype diff).
--- @param result {sha: string, title?: string, text: string, hunks?: table[]}
--- @param opts? {path?: string, new_start?: integer, open?: string}
--- @return integer bufnr
function M.show_commit(result, opts)
  opts = opts or {}
  local sha = tostring(result.sha or "")
  local name = "backstory://" .. sha:sub(1, 7)
  local text = type(result.text) == "string" and result.text or ""
  local lines = vim.split(text, "\n", { plain = true })
  if lines[#lines] == "" then
    table.remove(lines)
  end
  for i, l in ipairs(lines) do
    lines[i] = l:gsub("\r$", "")
  end

  -- Reuse a window already showing this commit; otherwise open one as configured.
  local existing = vim.fn.bufnr("^" .. vim.pesc(name) .. "$")
  local win = existing > 0 and vim.fn.bufwinid(existing) or -1
  if win > 0 then
    vim.api.nvim_set_current_win(win)
  elseif OPEN[opts.open or "split"] then
    vim.cmd(OPEN[opts.open or "split"])
  end
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_win_set_buf(0, buf)
  if existing > 0 and vim.api.nvim_buf_is_valid(existing) then
    pcall(vim.api.nvim_buf_delete, existing, { force = true })
  end
  pcall(vim.api.nvim_buf_set_name, buf, name)
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].swapfile = false
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  vim.bo[buf].filetype = "diff"
  vim.b[buf].backstory_sha = result.sha
  vim.b[buf].backstory_title = result.title
  vim.keymap.set("n", "q", "<cmd>close<cr>", { buffer = buf, nowait = true, desc = "Close commit" })

  local line = format.hunk_line(result.hunks, opts.path, opts.new_start)
  if type(line) == "number" then
    local row = math.min(math.max(line + 1, 1), math.max(#lines, 1))
    pcall(vim.api.nvim_win_set_cursor, 0, { row, 0 })
    vim.cmd("normal! zt")
  end
  return buf
end

return M
