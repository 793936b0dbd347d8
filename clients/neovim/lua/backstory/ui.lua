--- Presentation: pickers (vim.ui.select), the quickfix list, and the `backstory://` buffers: a commit
--- (`backstory://<sha>`), a file at a revision (`backstory://<sha>:<path>`, `backstory://<sha>^:<path>`), and
--- the diff view of a commit's file (both of those side by side, :diffthis).
local format = require("backstory.format")

local M = {}

local function present(v)
  return v ~= nil and v ~= vim.NIL
end

--- Show entries with vim.ui.select. A group entry (the exact history behind a prior-art answer) opens its
--- entries as a second list; an action entry runs its function.
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
    if not choice then
      return
    end
    if type(choice.group) == "table" then
      local group = choice.group
      local prompt = "Backstory: " .. group.title:lower():gsub("^history", "history") .. (opts.note or "")
      return M.pick(group.entries, vim.tbl_extend("force", opts, { prompt = prompt }))
    end
    if type(choice.action) == "table" then
      return choice.action.run()
    end
    opts.on_choice(choice, idx)
  end)
end

--- Replace the quickfix list with entries: each opens the commit view at its hunk.
--- @param entries table[]
--- @param title string
--- @param open boolean open the quickfix window
--- @param shown? table<string, table> showCommit answers by sha, already fetched (their buffers are filled now and
--- entries point at the hunk's line; without, the buffer is read when visited and found by the hunk's pattern)
function M.quickfix(entries, title, open, shown)
  local lnums, bufnrs = {}, {}
  for _, e in ipairs(format.commits(entries)) do
    local sha = e.commit.sha
    local result = shown and shown[sha]
    if result then
      local buf = M.commit_buffer(result)
      local hunk = format.primary_hunk(e) or {}
      local line = format.hunk_line(result.hunks, hunk.path, hunk.new_start)
      bufnrs[sha], lnums[sha] = buf, (line or 0) + 1
    end
  end
  vim.fn.setqflist({}, " ", {
    title = title,
    items = format.qf_items(entries, { lnums = lnums, bufnrs = bufnrs }),
    context = { backstory = true },
  })
  if open then
    vim.cmd("botright copen")
  end
end

--- The Backstory client to ask (set by init.lua; a function so ui has no LSP dependency of its own).
M.request = nil

local function set_lines(buf, lines)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
end

local function text_lines(text)
  local lines = vim.split(type(text) == "string" and text or "", "\n", { plain = true })
  if lines[#lines] == "" then
    table.remove(lines)
  end
  for i, l in ipairs(lines) do
    lines[i] = l:gsub("\r$", "")
  end
  return lines
end

local function scratch(buf)
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide" -- quickfix entries keep pointing at it
  vim.bo[buf].swapfile = false
end

--- Fill a commit buffer from a showCommit answer.
--- @param buf integer
--- @param result {sha: string, title?: string, text: string, hunks?: table[], files?: table[]}
function M.fill_commit(buf, result)
  scratch(buf)
  set_lines(buf, text_lines(result.text))
  vim.bo[buf].filetype = "git" -- git's own syntax for `git show`: commit header, message and diff
  vim.b[buf].backstory_sha = result.sha
  vim.b[buf].backstory_title = result.title
  vim.b[buf].backstory_hunks = result.hunks
  local map = function(lhs, fn, desc)
    vim.keymap.set("n", lhs, fn, { buffer = buf, nowait = true, desc = desc })
  end
  map("q", "<cmd>close<cr>", "Close the commit")
  map("gd", function()
    M.diff_at_cursor()
  end, "Backstory: the file under the cursor, before/after this commit, side by side")
  map("gf", function()
    M.file_at_cursor()
  end, "Backstory: the file under the cursor as it was in this commit")
end

--- Fill a file-at-revision buffer.
--- @param buf integer
--- @param result {sha: string|nil, path: string, exists: boolean, binary: boolean, text: string}
function M.fill_file(buf, result)
  scratch(buf)
  set_lines(buf, text_lines(result.text))
  local ft = vim.filetype.match({ filename = result.path, buf = buf })
  if ft then
    vim.bo[buf].filetype = ft
  end
  vim.b[buf].backstory_sha = result.sha
  vim.b[buf].backstory_path = result.path
end

--- BufReadCmd for `backstory://…`: fetch the commit or the file at the revision from the server.
--- @param buf integer
function M.read(buf)
  local name = vim.api.nvim_buf_get_name(buf)
  local rev, path = format.parse_buffer_name(name)
  if not rev or not M.request then
    return
  end
  local command = path and "backstory.fileAtRevision" or "backstory.showCommit"
  local result, err = M.request(command, path and { sha = rev, path = path } or { sha = rev }, buf)
  if err or type(result) ~= "table" then
    scratch(buf)
    local why = type(err) == "table" and tostring(err.message) or tostring(err or "no answer from the server")
    set_lines(buf, { ("Backstory: cannot show %s: %s"):format(name:sub(13), why) })
    return
  end
  if path then
    M.fill_file(buf, result)
  else
    M.fill_commit(buf, result)
  end
end

local OPEN = {
  split = "belowright split",
  vsplit = "belowright vsplit",
  tab = "tab split",
}

--- Open a buffer by name in a window as configured (reusing a window that shows it).
local function open_buffer(name, how)
  local existing = vim.fn.bufnr("^" .. vim.pesc(name) .. "$")
  local win = existing > 0 and vim.fn.bufwinid(existing) or -1
  if win > 0 then
    vim.api.nvim_set_current_win(win)
    return existing
  end
  if OPEN[how or "split"] then
    vim.cmd(OPEN[how or "split"])
  end
  vim.cmd.edit(vim.fn.fnameescape(name))
  return vim.api.nvim_get_current_buf()
end

--- The buffer `backstory://<sha>` filled with a showCommit answer (created unlisted if needed).
--- @param result table
--- @return integer bufnr
function M.commit_buffer(result)
  local name = format.buffer_name(result.sha)
  local buf = vim.fn.bufnr("^" .. vim.pesc(name) .. "$")
  if buf <= 0 then
    buf = vim.api.nvim_create_buf(false, false)
    vim.api.nvim_buf_set_name(buf, name)
  end
  if not vim.b[buf].backstory_sha then
    M.fill_commit(buf, result)
  end
  return buf
end

local FATE = vim.api.nvim_create_namespace("backstory_fate")

--- Show what became of a commit under its header's Date: line, as virtual lines (the text and the hunks'
--- positions stay the showCommit answer's); `lines` empty clears them. Kept in b:backstory_fate.
--- @param buf integer
--- @param lines string[]|nil e.g. { "Later:  reverted 3 weeks later by 1a2b3c4" }
function M.set_fate(buf, lines)
  vim.api.nvim_buf_clear_namespace(buf, FATE, 0, -1)
  lines = lines or {}
  vim.b[buf].backstory_fate = lines
  if #lines == 0 then
    return
  end
  local head = vim.api.nvim_buf_get_lines(buf, 0, 6, false)
  local at = 0
  for i, l in ipairs(head) do
    if vim.startswith(l, "Date:") then
      at = i - 1
      break
    end
  end
  local virt = vim.tbl_map(function(l)
    return { { l, "WarningMsg" } }
  end, lines)
  vim.api.nvim_buf_set_extmark(buf, FATE, at, 0, { virt_lines = virt })
end

--- Open a commit (`backstory://<sha>`) and put the cursor on the hunk of `path` (at `new_start`).
--- @param result table|nil a showCommit answer already at hand (else the buffer reads it)
--- @param opts {sha: string, path?: string, new_start?: integer, open?: string, fate?: string[]}
--- @return integer bufnr
function M.show_commit(result, opts)
  local name = format.buffer_name(opts.sha)
  if result then
    M.commit_buffer(result)
  end
  local buf = open_buffer(name, opts.open)
  if opts.fate then
    M.set_fate(buf, opts.fate)
  end
  local hunks = vim.b[buf].backstory_hunks
  local line = format.hunk_line(type(hunks) == "table" and hunks or {}, opts.path, opts.new_start)
  if type(line) == "number" then
    local count = vim.api.nvim_buf_line_count(buf)
    pcall(vim.api.nvim_win_set_cursor, 0, { math.min(math.max(line + 1, 1), count), 0 })
    vim.cmd("normal! zt")
  end
  return buf
end

--- A file as it was in a commit.
--- @param opts {sha: string, path: string, line?: integer, open?: string}
function M.show_file(opts)
  local buf = open_buffer(format.buffer_name(opts.sha, opts.path), opts.open)
  if opts.line then
    pcall(vim.api.nvim_win_set_cursor, 0, { math.min(math.max(opts.line, 1), vim.api.nvim_buf_line_count(buf)), 0 })
  end
  return buf
end

--- A commit's change to one file, side by side: the parent's version left, the commit's right (:diffthis),
--- in a new tab. `old_path`: the file's path in the parent, when the commit renamed it.
--- @param opts {sha: string, path: string, old_path?: string}
--- @return integer left, integer right
function M.diff(opts)
  vim.cmd("tabnew")
  local scratch_tab_buf = vim.api.nvim_get_current_buf()
  vim.cmd.edit(vim.fn.fnameescape(format.buffer_name(opts.sha, opts.old_path or opts.path, true)))
  local left = vim.api.nvim_get_current_buf()
  if scratch_tab_buf ~= left and vim.api.nvim_buf_is_valid(scratch_tab_buf) then
    pcall(vim.api.nvim_buf_delete, scratch_tab_buf, {})
  end
  vim.cmd("diffthis")
  vim.cmd("rightbelow vsplit " .. vim.fn.fnameescape(format.buffer_name(opts.sha, opts.path)))
  local right = vim.api.nvim_get_current_buf()
  vim.cmd("diffthis")
  for _, b in ipairs({ left, right }) do
    vim.keymap.set("n", "q", "<cmd>tabclose<cr>", { buffer = b, nowait = true, desc = "Close the diff" })
  end
  pcall(vim.cmd, "normal! ]c") -- the first change
  return left, right
end

--- In a commit buffer: the file of the `diff --git` section around the cursor, and the line of the commit's
--- version of it that the cursor is on (nil on a removed line or a header).
--- @return {sha: string, path: string, old_path: string, line: integer|nil}|nil
function M.file_under_cursor()
  local buf = vim.api.nvim_get_current_buf()
  local sha = vim.b[buf].backstory_sha
  if not present(sha) then
    return nil
  end
  local row = vim.api.nvim_win_get_cursor(0)[1]
  local lines = vim.api.nvim_buf_get_lines(buf, 0, row, false)
  local here = lines[row] or ""
  local header
  for i = row, 1, -1 do
    if lines[i]:match("^@@ ") then
      header = i
      break
    elseif lines[i]:match("^diff %-%-git ") then
      break
    end
  end
  local line
  if header and row > header and not here:match("^%-") then
    local start = tonumber(lines[header]:match("^@@ %-%S+ %+(%d+)"))
    local n = 0
    for i = header + 1, row - 1 do
      local c = lines[i]:sub(1, 1)
      if c == " " or c == "+" then
        n = n + 1
      end
    end
    line = start and (start + n) or nil
  end
  for i = row, 1, -1 do
    local a, b = lines[i]:match("^diff %-%-git a/(.-) b/(.*)$")
    if a then
      return { sha = sha, path = b, old_path = a, line = line }
    end
  end
  return nil
end

function M.diff_at_cursor()
  local f = M.file_under_cursor()
  if not f then
    return vim.notify("Backstory: put the cursor in a file's diff first", vim.log.levels.WARN)
  end
  M.diff({ sha = f.sha, path = f.path, old_path = f.old_path ~= f.path and f.old_path or nil })
end

function M.file_at_cursor()
  local f = M.file_under_cursor()
  if not f then
    return vim.notify("Backstory: put the cursor in a file's diff first", vim.log.levels.WARN)
  end
  M.show_file({ sha = f.sha, path = f.path, line = f.line, open = "current" })
end

return M
