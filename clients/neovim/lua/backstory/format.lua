--- Pure formatting helpers (no editor state): dates, picker items, quickfix items, status text.
local M = {}

local NIL = vim and vim.NIL or nil

local function present(v)
  return v ~= nil and v ~= NIL
end

local function str(v, default)
  if present(v) then
    return tostring(v)
  end
  return default or ""
end

-- Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
local function days_from_civil(y, m, d)
  if m <= 2 then
    y = y - 1
  end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = (m + 9) % 12
  local doy = math.floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end

--- Parse an ISO 8601 timestamp ("2026-11-20T10:11:12+00:00", "...Z", "...+0200", date only).
--- @param s string
--- @return integer|nil seconds since the epoch (UTC)
function M.parse_iso8601(s)
  if type(s) ~= "string" then
    return nil
  end
  local y, mo, d, rest = s:match("^(%d%d%d%d)-(%d%d)-(%d%d)(.*)$")
  if not y then
    return nil
  end
  local h, mi, sec = 0, 0, 0
  if rest ~= "" then
    local hh, mm, ss, tail = rest:match("^[Tt ](%d%d):(%d%d):?(%d?%d?)(.*)$")
    if not hh then
      return nil
    end
    h, mi, sec = tonumber(hh), tonumber(mm), tonumber(ss) or 0
    rest = tail:gsub("^[.,]%d+", "")
  end
  local offset = 0
  if rest == "Z" or rest == "z" or rest == "" then
    offset = 0
  else
    local sign, oh, om = rest:match("^([+-])(%d%d):?(%d%d)$")
    if not sign then
      sign, oh = rest:match("^([+-])(%d%d)$")
      om = "00"
    end
    if not sign then
      return nil
    end
    offset = (tonumber(oh) * 3600 + tonumber(om) * 60) * (sign == "-" and -1 or 1)
  end
  local days = days_from_civil(tonumber(y), tonumber(mo), tonumber(d))
  return days * 86400 + h * 3600 + mi * 60 + sec - offset
end

local function plural(n, unit)
  if n == 1 then
    return ("1 %s ago"):format(unit)
  end
  return ("%d %ss ago"):format(n, unit)
end

--- "3 days ago", "2 years ago", "just now". Future dates (clock skew) within a minute are
--- "just now"; further in the future the date itself is returned.
--- @param iso string ISO 8601 timestamp
--- @param now integer|nil seconds since the epoch (default os.time())
--- @return string
function M.relative_date(iso, now)
  local t = M.parse_iso8601(iso)
  if not t then
    return str(iso, "")
  end
  now = now or os.time()
  local diff = now - t
  if diff < -60 then
    return iso:sub(1, 10)
  end
  if diff < 60 then
    return "just now"
  end
  local minute, hour, day = 60, 3600, 86400
  if diff < hour then
    return plural(math.floor(diff / minute), "minute")
  elseif diff < day then
    return plural(math.floor(diff / hour), "hour")
  elseif diff < 7 * day then
    return plural(math.floor(diff / day), "day")
  elseif diff < 30 * day then
    return plural(math.floor(diff / (7 * day)), "week")
  elseif diff < 365 * day then
    return plural(math.max(1, math.floor(diff / (30 * day))), "month")
  end
  return plural(math.floor(diff / (365 * day)), "year")
end

--- The file and line span a hunk covers, e.g. "src/http.py:10-21".
--- @param hunk table a hunk from the protocol
--- @return string
function M.hunk_location(hunk)
  if type(hunk) ~= "table" then
    return ""
  end
  local deleted = hunk.change == "delete"
  local path = deleted and str(hunk.old_path, str(hunk.path)) or str(hunk.path, str(hunk.old_path))
  local start = tonumber(deleted and hunk.old_start or hunk.new_start)
  local count = tonumber(deleted and hunk.old_lines or hunk.new_lines)
  if not start then
    return path
  end
  if start < 1 then
    start = 1
  end
  if count and count > 1 then
    return ("%s:%d-%d"):format(path, start, start + count - 1)
  end
  return ("%s:%d"):format(path, start)
end

--- Why a result matched: "exact" for symbol history, else its lanes ordered by rank.
--- @param entry table a result entry
--- @return string e.g. "[exact]", "[symbol,diff]"
function M.why(entry)
  if type(entry) ~= "table" then
    return ""
  end
  if entry.provenance == "EXACT" then
    return "[exact]"
  end
  local why = type(entry.why) == "table" and entry.why or {}
  local lanes = type(why.lanes) == "table" and why.lanes or {}
  local names = {}
  for name, rank in pairs(lanes) do
    if type(rank) == "number" then
      table.insert(names, name)
    end
  end
  table.sort(names, function(a, b)
    if lanes[a] ~= lanes[b] then
      return lanes[a] < lanes[b]
    end
    return a < b
  end)
  if #names == 0 then
    return ""
  end
  return "[" .. table.concat(names, ",") .. "]"
end

local function truncate(s, width)
  if not width or width <= 0 then
    return s
  end
  local ok, n = pcall(vim.fn.strchars, s)
  n = ok and n or #s
  if n <= width then
    return s
  end
  local ok2, part = pcall(vim.fn.strcharpart, s, 0, width - 1)
  return (ok2 and part or s:sub(1, width - 1)) .. "…"
end

--- One picker line: "subject  short_sha  author  relative-date  path:lines  [why]".
--- @param entry table a result entry ({provenance, commit, why, hunks})
--- @param opts? {now?: integer, subject_width?: integer}
--- @return string
function M.item(entry, opts)
  opts = opts or {}
  local commit = type(entry.commit) == "table" and entry.commit or {}
  local author = type(commit.author) == "table" and commit.author or {}
  local hunks = type(entry.hunks) == "table" and entry.hunks or {}
  local sha = str(commit.short_sha, str(commit.sha):sub(1, 7))
  local location = M.hunk_location(hunks[1])
  if #hunks > 1 and location ~= "" then
    location = ("%s +%d"):format(location, #hunks - 1)
  end
  local parts = {
    truncate(str(commit.subject, "(no subject)"), opts.subject_width or 60),
    sha,
    str(author.name),
    M.relative_date(str(commit.date), opts.now),
    location,
    M.why(entry),
  }
  local out = {}
  for _, p in ipairs(parts) do
    if p ~= "" then
      table.insert(out, p)
    end
  end
  return table.concat(out, "  ")
end

local function as_list(v)
  if type(v) ~= "table" then
    return {}
  end
  if vim.islist(v) then
    return v
  end
  -- a symbol-history object: {symbol, commits}
  if type(v.commits) == "table" then
    return v.commits
  end
  return {}
end

--- Flatten a command result into picker entries.
--- prior-art: exact (symbol history) first, then related results; history: commits; search: results.
--- @param result table
--- @return table[] entries
function M.entries(result)
  local out, seen = {}, {}
  if type(result) ~= "table" then
    return out
  end
  local function add(list, provenance)
    for _, e in ipairs(as_list(list)) do
      if type(e) == "table" and type(e.commit) == "table" then
        local sha = e.commit.sha
        if not (sha and seen[sha]) then
          if sha then
            seen[sha] = true
          end
          if provenance and not present(e.provenance) then
            e.provenance = provenance
          end
          table.insert(out, e)
        end
      end
    end
  end
  add(result.exact, "EXACT")
  add(result.commits, "EXACT")
  add(result.results, "INFERRED")
  return out
end

--- Quickfix items for entries, one per entry (its first hunk).
--- @param entries table[]
--- @param root string|nil repository root to resolve hunk paths
--- @param opts? {now?: integer}
--- @return table[] items for setqflist()
function M.qf_items(entries, root, opts)
  opts = opts or {}
  local items = {}
  for _, e in ipairs(entries) do
    local commit = e.commit or {}
    local author = type(commit.author) == "table" and commit.author or {}
    local hunk = type(e.hunks) == "table" and e.hunks[1] or nil
    local item = {
      text = ("%s  %s  %s  %s %s"):format(
        str(commit.short_sha, str(commit.sha):sub(1, 7)),
        str(commit.subject),
        str(author.name),
        M.relative_date(str(commit.date), opts.now),
        M.why(e)
      ),
      user_data = { sha = commit.sha },
      valid = 1,
    }
    if hunk then
      local deleted = hunk.change == "delete"
      local path = deleted and str(hunk.old_path, str(hunk.path)) or str(hunk.path, str(hunk.old_path))
      if path ~= "" then
        if root and root ~= "" and path:sub(1, 1) ~= "/" then
          path = root:gsub("/$", "") .. "/" .. path
        end
        item.filename = path
        item.lnum = math.max(1, tonumber(deleted and hunk.old_start or hunk.new_start) or 1)
      end
    end
    if not item.filename then
      item.valid = 0
    end
    table.insert(items, item)
  end
  return items
end

--- Pick the 0-based line in a showCommit text to put the cursor on.
--- @param hunks table[] showCommit hunks: {path, new_start, line}
--- @param path string|nil preferred path
--- @param new_start integer|nil preferred hunk start
--- @return integer|nil
function M.hunk_line(hunks, path, new_start)
  if type(hunks) ~= "table" or #hunks == 0 then
    return nil
  end
  local by_path
  for _, h in ipairs(hunks) do
    if path and h.path == path then
      if new_start and h.new_start == new_start then
        return h.line
      end
      by_path = by_path or h.line
    end
  end
  return by_path or hunks[1].line
end

--- Short status text: "Backstory: indexing 120/5000", "Backstory: ready".
--- @param status table|nil a backstory/status payload
--- @return string
function M.status_text(status)
  if type(status) ~= "table" or not present(status.state) then
    return ""
  end
  local state = status.state
  if state == "indexing" then
    local done, total = tonumber(status.done), tonumber(status.total)
    local phase = present(status.phase) and status.phase ~= "history" and (" " .. status.phase) or ""
    if done and total then
      return ("Backstory: indexing%s %d/%d"):format(phase, done, total)
    end
    return "Backstory: indexing" .. phase
  elseif state == "no-repo" then
    return "Backstory: no repository"
  end
  return "Backstory: " .. tostring(state)
end

--- Multi-line summary of `backstory.status` / `backstory status --json`.
--- Accepts the index fields at top level or under "index".
--- @param s table
--- @return string
function M.status_summary(s)
  if type(s) ~= "table" then
    return "Backstory: no status"
  end
  local idx = type(s.index) == "table" and s.index or s
  local lines = {}
  local repo = s.repo or idx.repo or (type(s._meta) == "table" and s._meta.repo)
  if present(repo) then
    table.insert(lines, "repository: " .. tostring(repo))
  end
  local server = type(s.server) == "table" and s.server or {}
  local state = present(s.state) and s.state or server.state
  if present(state) then
    local l = "state: " .. tostring(state)
    if state ~= "ready" and present(server.message) then
      l = l .. " (" .. tostring(server.message) .. ")"
    end
    table.insert(lines, l)
  end
  if present(idx.indexed_commits) then
    local l = "indexed commits: " .. tostring(idx.indexed_commits)
    if present(idx.commits_behind_head) then
      l = l .. (" (%s behind HEAD)"):format(tostring(idx.commits_behind_head))
    end
    table.insert(lines, l)
  end
  if type(idx.dense_coverage) == "number" then
    table.insert(lines, ("dense coverage: %d%%"):format(math.floor(idx.dense_coverage * 100 + 0.5)))
  end
  if present(idx.indexed_at) then
    table.insert(lines, "indexed at: " .. tostring(idx.indexed_at))
  end
  local hint = s.hint
  if not present(hint) and type(s._meta) == "table" then
    hint = s._meta.hint
  end
  if present(hint) and hint ~= false and hint ~= "" then
    table.insert(lines, "hint: " .. tostring(hint))
  end
  if present(s.message) then
    table.insert(lines, tostring(s.message))
  end
  if #lines == 0 then
    return "Backstory: " .. vim.json.encode(s)
  end
  return "Backstory\n  " .. table.concat(lines, "\n  ")
end

return M
