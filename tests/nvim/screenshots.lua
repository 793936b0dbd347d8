-- Screenshots of backstory.nvim against the real server, for docs/images/.
--
-- This script (run with `nvim --headless -l`) is a UI client: it starts `nvim --embed` with the plugin,
-- attaches to it over msgpack-RPC (ext_linegrid, RGB), keeps the screen grid it is sent (floats, the
-- command line and messages included: the child composites them), and at each step writes the screen as HTML
-- and has Chromium render it to a PNG. The steps are real: the server indexes the repository, `K` shows the
-- hover, :Backstory prior-art goes through vim.ui.select (the built-in inputlist), the commit view and the
-- diff view are the plugin's buffers.
-- Environment: BACKSTORY_CMD, BACKSTORY_FILE, BACKSTORY_LINE, BACKSTORY_SYMBOL, BACKSTORY_SUBJECT,
-- BACKSTORY_DIFF_LINE, BACKSTORY_PLUGIN (clients/neovim), BACKSTORY_SCREENSHOTS (output folder), CHROMIUM.
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)")
local T = dofile(here .. "harness.lua")
local env = vim.env
local uv = vim.uv
local COLS, ROWS = 118, 34
local out_dir = vim.fn.fnamemodify(env.BACKSTORY_SCREENSHOTS, ":p")
vim.fn.mkdir(out_dir, "p")
local extra = { shots = {} }

-- the embedded Neovim and its RPC channel ----------------------------------------------------------------
local stdin, stdout = uv.new_pipe(false), uv.new_pipe(false)
local child = uv.spawn(vim.v.progpath, {
  args = { "--embed", "-u", "NONE", "-i", "NONE", "-n", "--cmd", "set rtp^=" .. env.BACKSTORY_PLUGIN },
  stdio = { stdin, stdout, nil },
  cwd = vim.fn.fnamemodify(env.BACKSTORY_FILE, ":h"),
}, function() end)
assert(child, "cannot start nvim --embed")

local unpacker = vim.mpack.Unpacker()
local responses, next_id = {}, 0
local grid, hl, colors, cursor = {}, { [0] = {} }, { fg = 0x000000, bg = 0xffffff }, { 0, 0 }

local function set_cell(r, c, text, id)
  grid[r] = grid[r] or {}
  grid[r][c] = { text, id }
end

local handlers = {
  grid_resize = function(_, w, h)
    COLS, ROWS = w, h
  end,
  default_colors_set = function(fg, bg)
    colors.fg = fg >= 0 and fg or colors.fg
    colors.bg = bg >= 0 and bg or colors.bg
  end,
  hl_attr_define = function(id, rgb)
    hl[id] = rgb
  end,
  grid_clear = function()
    grid = {}
  end,
  grid_cursor_goto = function(_, r, c)
    cursor = { r, c }
  end,
  grid_line = function(_, row, col, cells)
    local id = 0
    for _, cell in ipairs(cells) do
      id = cell[2] or id
      for _ = 1, cell[3] or 1 do
        set_cell(row, col, cell[1], id)
        col = col + 1
      end
    end
  end,
  grid_scroll = function(_, top, bot, left, right, rows)
    local from, to, step = top, bot - rows - 1, 1
    if rows < 0 then
      from, to, step = bot - 1, top - rows, -1
    end
    for r = from, to, step do
      grid[r] = grid[r] or {}
      for c = left, right - 1 do
        grid[r][c] = (grid[r + rows] or {})[c]
      end
    end
  end,
}

stdout:read_start(function(err, data)
  assert(not err, err)
  if not data then
    return
  end
  local pos = 1
  while pos <= #data do
    local msg, np = unpacker(data, pos)
    pos = np
    if msg == nil then
      break
    end
    if msg[1] == 1 then
      responses[msg[2]] = { err = msg[3], result = msg[4] }
    elseif msg[1] == 2 and msg[2] == "redraw" then
      for _, batch in ipairs(msg[3]) do
        local h = handlers[batch[1]]
        if h then
          for i = 2, #batch do
            h(unpack(batch[i]))
          end
        end
      end
    end
  end
end)

local function request(method, ...)
  next_id = next_id + 1
  local id = next_id
  stdin:write(vim.mpack.encode({ 0, id, method, { ... } }))
  assert(vim.wait(60000, function()
    return responses[id] ~= nil
  end, 10), method .. ": no answer")
  local r = responses[id]
  responses[id] = nil
  if r.err ~= vim.NIL and r.err ~= nil then
    error(method .. ": " .. vim.inspect(r.err))
  end
  return r.result
end

local function lua(code, ...)
  return request("nvim_exec_lua", code, { ... })
end

local function screen_lines()
  local lines = {}
  for r = 0, ROWS - 1 do
    local row = grid[r] or {}
    local s = {}
    for c = 0, COLS - 1 do
      table.insert(s, row[c] and row[c][1] or " ")
    end
    lines[r + 1] = table.concat(s)
  end
  return lines
end

local function screen_has(needle)
  for _, l in ipairs(screen_lines()) do
    if l:find(needle, 1, true) then
      return l
    end
  end
  return nil
end

local function wait_screen(needle, ms)
  local found
  vim.wait(ms or 30000, function()
    found = screen_has(needle)
    return found ~= nil
  end, 50)
  if not found then
    error(("%q never showed on the screen:\n%s"):format(needle, table.concat(screen_lines(), "\n")))
  end
  vim.wait(300, function()
    return false
  end, 50) -- let the rest of the redraw arrive
  return found
end

-- the screen as a PNG --------------------------------------------------------------------------------------
local function css_color(n)
  return ("#%06x"):format(n)
end

local function escape(s)
  return (s:gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"))
end

local function style(id, at_cursor)
  local a = hl[id] or {}
  local fg, bg = a.foreground or colors.fg, a.background or colors.bg
  if a.reverse then
    fg, bg = bg, fg
  end
  if at_cursor then
    fg, bg = colors.bg, colors.fg
  end
  local s = ("color:%s;background:%s"):format(css_color(fg), css_color(bg))
  if a.bold then
    s = s .. ";font-weight:bold"
  end
  if a.italic then
    s = s .. ";font-style:italic"
  end
  if a.underline or a.undercurl then
    s = s .. ";text-decoration:underline"
  end
  return s
end

local function capture(name)
  local html = {
    "<!doctype html><meta charset=utf-8><style>",
    ("html,body{margin:0;background:%s}"):format(css_color(colors.bg)),
    "pre{margin:0;padding:8px;font:15px/19px 'DejaVu Sans Mono',monospace;white-space:pre}",
    "span{display:inline-block;width:9.04px;height:19px;overflow:visible}</style><pre>",
  }
  for r = 0, ROWS - 1 do
    local row = grid[r] or {}
    local line = {}
    for c = 0, COLS - 1 do
      local cell = row[c] or { " ", 0 }
      if cell[1] ~= "" then
        table.insert(line, ('<span style="%s">%s</span>'):format(style(cell[2], r == cursor[1] and c == cursor[2]), escape(cell[1])))
      end
    end
    table.insert(html, table.concat(line) .. "\n")
  end
  table.insert(html, "</pre>")
  local file = vim.fn.tempname() .. ".html"
  vim.fn.writefile(vim.split(table.concat(html), "\n"), file)
  local png = out_dir .. "/" .. name
  local width, height = math.ceil(COLS * 9.04 + 16), ROWS * 19 + 16
  local res = vim.system({
    env.CHROMIUM or "/usr/bin/chromium",
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
    "--screenshot=" .. png,
    ("--window-size=%d,%d"):format(width, height),
    "file://" .. file,
  }, { text = true }):wait(60000)
  table.insert(extra.shots, { name = name, code = res.code, lines = screen_lines() })
  if res.code ~= 0 or vim.fn.filereadable(png) ~= 1 then
    error("chromium failed: " .. (res.stderr or ""))
  end
end

-- the scenario --------------------------------------------------------------------------------------------
local subject, symbol = env.BACKSTORY_SUBJECT, env.BACKSTORY_SYMBOL

request("nvim_ui_attach", COLS, ROWS, { ext_linegrid = true, rgb = true })
lua(
  [[
  local cmd, file = ...
  vim.o.termguicolors = true
  vim.o.laststatus = 2
  vim.o.number = true
  vim.o.cmdheight = 1
  vim.cmd("filetype plugin on | syntax on")
  vim.o.statusline = " %f %= %{v:lua.require'backstory'.statusline()} "
  vim.g.backstory = { cmd = cmd, open = "split" }
  vim.cmd("runtime! plugin/backstory.lua")
  vim.lsp.enable("backstory")
  vim.cmd.edit(vim.fn.fnameescape(file))
]],
  vim.json.decode(env.BACKSTORY_CMD),
  env.BACKSTORY_FILE
)

T.test("the server indexes; the status line says so", function()
  local ok = vim.wait(120000, function()
    return lua("return require('backstory').statusline()") == "Backstory: ready"
  end, 200)
  assert(ok, "never ready: " .. tostring(lua("return require('backstory').statusline()")))
  vim.wait(1500, function()
    return false
  end, 100) -- the hover prewarm
end)

local function to_symbol()
  lua([[
    local line, symbol, file = ...
    vim.cmd("silent! only")
    vim.cmd.edit(vim.fn.fnameescape(file))
    local text = vim.api.nvim_buf_get_lines(0, line - 1, line, false)[1]
    vim.api.nvim_win_set_cursor(0, { line, text:find(symbol, 1, true) - 1 })
    vim.cmd("normal! zz")
  ]], tonumber(env.BACKSTORY_LINE), symbol, env.BACKSTORY_FILE)
end

T.test("hover", function()
  to_symbol()
  request("nvim_input", "K")
  wait_screen("Past changes to")
  capture("nvim-hover.png")
  request("nvim_input", "<Esc>")
end)

local function pick_number(needle)
  local line = wait_screen(needle)
  return line:match("^%s*(%d+)")
end

T.test("prior art through vim.ui.select, the history as a second list", function()
  to_symbol()
  request("nvim_input", ":Backstory prior-art<CR>")
  wait_screen("Type number and <Enter>")
  capture("nvim-prior-art.png")
  local n = pick_number("History of " .. symbol)
  request("nvim_input", n .. "<CR>")
  wait_screen("history of " .. symbol)
  wait_screen("Type number and <Enter>")
  capture("nvim-history.png")
  request("nvim_input", pick_number(subject) .. "<CR>")
  wait_screen("@@ ")
  capture("nvim-commit.png")
end)

T.test("the diff view", function()
  lua([[
    local diff_line = ...
    local lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
    for i, l in ipairs(lines) do
      if l == diff_line then
        vim.api.nvim_win_set_cursor(0, { i, 0 })
      end
    end
  ]], env.BACKSTORY_DIFF_LINE)
  request("nvim_input", "gd")
  wait_screen("^:")
  capture("nvim-diff.png")
  request("nvim_input", ":tabclose<CR>")
end)

T.test("quickfix: each entry opens the commit at its hunk", function()
  to_symbol()
  request("nvim_input", ":Backstory! prior-art<CR>")
  wait_screen("same function")
  request("nvim_input", ":wincmd p<CR>")
  capture("nvim-quickfix.png")
end)

pcall(request, "nvim_command", "qa!")
child:kill(9)
T.finish(extra)
