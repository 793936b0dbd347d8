--- Pure formatting helpers (no editor state): dates, picker items, quickfix items, buffer names, status text.
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

--- "3 weeks ago", "7 months ago", "2 years ago": the one rule the server (views/age.py) and the VS Code
--- client use too, checked against the shared table tests/data/ages.json. Less than a minute (or up to a
--- minute in the future): "just now"; further in the future: the date (YYYY-MM-DD, UTC); else the largest
--- unit that fits, in whole units: minutes, hours, days, weeks (below 30 days), months of 30 days (at most
--- 11, below 365 days), years of 365 days.
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
    return os.date("!%Y-%m-%d", t)
  end
  if diff < 60 then
    return "just now"
  end
  local minute, hour, day = 60, 3600, 86400
  if diff < hour then
    return plural(math.floor(diff / minute), "minute")
  elseif diff < day then
    return plural(math.floor(diff / hour), "hour")
  end
  local days = math.floor(diff / day)
  if days < 7 then
    return plural(days, "day")
  elseif days < 30 then
    return plural(math.floor(days / 7), "week")
  elseif days < 365 then
    return plural(math.min(11, math.floor(days / 30)), "month")
  end
  return plural(math.floor(days / 365), "year")
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
  part = ok2 and part or s:sub(1, width - 1)
  local cut = part:match("^(.*%S)%s+%S*$") -- at a word boundary when there is one in the second half
  if cut and #cut > width / 2 then
    part = cut
  end
  return part .. "…"
end
M.truncate = truncate

--- The hunk that explains a result best: the best-ranked one in any lane, else the first.
--- @param entry table
--- @return table|nil
function M.primary_hunk(entry)
  local hunks = type(entry) == "table" and type(entry.hunks) == "table" and entry.hunks or {}
  local best, best_rank
  for _, h in ipairs(hunks) do
    for _, rank in pairs(type(h.lanes) == "table" and h.lanes or {}) do
      if type(rank) == "number" and (best_rank == nil or rank < best_rank) then
        best, best_rank = h, rank
      end
    end
  end
  return best or hunks[1]
end

--- Why a result is shown, in words: the server's `reason` ("same function", "similar change in src/x.py",
--- "message matches your words"), with the lines it changed.
--- @param entry table a result entry
--- @return string
function M.why(entry)
  if type(entry) ~= "table" then
    return ""
  end
  local hunk = M.primary_hunk(entry)
  local where = M.hunk_location(hunk)
  local reason = present(entry.reason) and tostring(entry.reason) or ""
  local path = hunk and str(hunk.change == "delete" and hunk.old_path or hunk.path) or ""
  if reason ~= "" and path ~= "" and (reason:find(path, 1, true) or reason:find("this file", 1, true)) then
    local lines = where:sub(#path + 2)
    return lines ~= "" and ("%s (line%s %s)"):format(reason, lines:find("-", 1, true) and "s" or "", lines) or reason
  end
  if reason ~= "" and where ~= "" then
    return reason .. " · " .. where
  end
  return reason ~= "" and reason or where
end

local VERBS = { reverted = "reverted", reapplied = "re-applied", fixed = "fixed", ["cherry-picked"] = "cherry-picked" }

--- A gap in days as people say it: "the same day", "2 days later", "3 weeks later" (server: views/consequences.py).
--- @param days number
--- @return string
function M.later(days)
  days = tonumber(days)
  if not days or days < 1 then
    return "the same day"
  end
  for _, u in ipairs({ { 365, "year" }, { 30, "month" }, { 7, "week" }, { 1, "day" } }) do
    if days >= u[1] then
      local n = math.floor(days / u[1])
      return ("%d %s%s later"):format(n, u[2], n ~= 1 and "s" or "")
    end
  end
  return "later"
end

local function short_of(commit)
  commit = type(commit) == "table" and commit or {}
  return str(commit.short_sha, str(commit.sha):sub(1, 7))
end

--- What became of a commit, oldest first: "reverted 3 weeks later by 1a2b3c4; re-applied 1 month later by …"
--- ("" when nothing is known). The shared table tests/data/consequences.json checks it against the server.
--- @param items table[]|nil the `consequences` of a result entry
--- @return string
function M.consequences(items)
  local out = {}
  for _, c in ipairs(type(items) == "table" and items or {}) do
    if type(c) == "table" then
      local kind = str(c.kind)
      table.insert(out, ("%s %s by %s"):format(VERBS[kind] or kind, M.later(c.after_days), short_of(c.by)))
    end
  end
  return table.concat(out, "; ")
end

--- Identical changes shown once: "the same change also as 1a2b3c4, 5d6e7f8" ("" without twins).
--- @param twins table[]|nil commit objects
--- @return string
function M.twins(twins)
  if type(twins) ~= "table" or #twins == 0 then
    return ""
  end
  return "the same change also as " .. table.concat(vim.tbl_map(short_of, twins), ", ")
end

--- Consequences and twins of a result entry in one line ("" when nothing is known).
function M.fate(entry)
  if type(entry) ~= "table" then
    return ""
  end
  local parts = vim.tbl_filter(function(p)
    return p ~= ""
  end, { M.consequences(entry.consequences), M.twins(entry.twins) })
  return table.concat(parts, "; ")
end

--- The commit view's extra header lines for a result entry: "Later:  …", "Same:   …".
--- @return string[]
function M.fate_header(entry)
  local out = {}
  local later = M.consequences(type(entry) == "table" and entry.consequences or nil)
  if later ~= "" then
    table.insert(out, "Later:  " .. later)
  end
  local same = M.twins(type(entry) == "table" and entry.twins or nil)
  if same ~= "" then
    table.insert(out, "Same:   " .. same)
  end
  return out
end

--- One picker line: "subject · 9f1c2ab Ada, 3 days ago · why · fate"; a group: "History of f: 4 changes…".
--- @param entry table a result entry ({provenance, commit, reason, hunks}) or a group ({group = {...}})
--- @param opts? {now?: integer, subject_width?: integer}
--- @return string
function M.item(entry, opts)
  opts = opts or {}
  if type(entry.group) == "table" then
    return entry.group.label
  end
  if type(entry.action) == "table" then
    return entry.action.label
  end
  local commit = type(entry.commit) == "table" and entry.commit or {}
  local author = type(commit.author) == "table" and commit.author or {}
  local sha = str(commit.short_sha, str(commit.sha):sub(1, 7))
  local by = vim.tbl_filter(function(p)
    return p ~= ""
  end, { str(author.name), M.relative_date(str(commit.date), opts.now) })
  local parts = {
    truncate(str(commit.subject, "(no subject)"), opts.subject_width or 60),
    vim.trim(sha .. " " .. table.concat(by, ", ")),
    M.why(entry),
    M.fate(entry),
  }
  local out = {}
  for _, p in ipairs(parts) do
    if p ~= "" then
      table.insert(out, p)
    end
  end
  return table.concat(out, " · ")
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

local function count(n, what)
  return ("%d %s%s"):format(n, what, n == 1 and "" or "s")
end

--- Flatten a command result into picker entries. Prior art first: the related commits lead, and the
--- symbol's exact history follows as ONE entry (a group) that opens it as a second list; history and search
--- answers are their commits.
--- @param result table
--- @return table[] entries
function M.entries(result)
  local out, seen = {}, {}
  if type(result) ~= "table" then
    return out
  end
  local function collect(list, provenance)
    local items = {}
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
          table.insert(items, e)
        end
      end
    end
    return items
  end
  local exact = collect(result.exact, "EXACT")
  vim.list_extend(out, collect(result.commits, "EXACT"))
  vim.list_extend(out, collect(result.results, "INFERRED"))
  if #exact > 0 then
    local symbol = type(result.symbol) == "table" and present(result.symbol.name) and result.symbol.name or nil
    local title = symbol and ("History of " .. symbol) or "Exact history"
    table.insert(out, { group = { title = title, label = ("%s: %s…"):format(title, count(#exact, "change")), entries = exact } })
  end
  return out
end

--- The commits among entries (groups flattened), for completion and the quickfix list.
function M.commits(entries)
  local out = {}
  for _, e in ipairs(entries or {}) do
    if type(e.group) == "table" then
      vim.list_extend(out, e.group.entries)
    elseif type(e.commit) == "table" then
      table.insert(out, e)
    end
  end
  return out
end

--- The partial-results note of an answer (the server's `_meta.partial` and hint), else nil.
--- @param result table
--- @return string|nil
function M.partial(result)
  local meta = type(result) == "table" and type(result._meta) == "table" and result._meta or {}
  if meta.partial ~= true then
    return nil
  end
  return present(meta.hint) and tostring(meta.hint) or "the index is not complete yet"
end

local function header_range(start, n)
  if tonumber(n) == 1 then
    return tostring(start)
  end
  return ("%s,%s"):format(tostring(start), tostring(n))
end

--- The search pattern of a hunk's header in the commit view ("@@ -10,3 +10,12 @@", very nomagic).
--- @param hunk table
--- @return string|nil
function M.hunk_pattern(hunk)
  if type(hunk) ~= "table" or not tonumber(hunk.old_start) or not tonumber(hunk.new_start) then
    return nil
  end
  return ("\\V\\^@@ -%s +%s @@"):format(header_range(hunk.old_start, hunk.old_lines), header_range(hunk.new_start, hunk.new_lines))
end

--- The name of the buffer that shows a commit (`backstory://<short sha>`) or a file at a revision
--- (`backstory://<short sha>:<path>`, `backstory://<short sha>^:<path>` for the parent).
--- @param sha string
--- @param path string|nil
--- @param parent boolean|nil
function M.buffer_name(sha, path, parent)
  local rev = tostring(sha):sub(1, 7) .. (parent and "^" or "")
  return "backstory://" .. rev .. (path and (":" .. path) or "")
end

--- Parse a buffer name made by buffer_name: rev (with any ^/~ suffix) and path (nil for a commit).
--- @param name string
--- @return string|nil rev, string|nil path
function M.parse_buffer_name(name)
  local rest = type(name) == "string" and name:match("^backstory://(.+)$")
  if not rest then
    return nil, nil
  end
  local rev, path = rest:match("^([^:]+):(.+)$")
  if rev then
    return rev, path
  end
  return rest, nil
end

--- Quickfix items for entries, one per commit: each opens the commit view at its hunk (the buffer
--- `backstory://<sha>` at the hunk header's line when known, else the header's search pattern), never a
--- working-tree file.
--- @param entries table[]
--- @param opts? {now?: integer, lnums?: table<string, integer>, bufnrs?: table<string, integer>}
--- @return table[] items for setqflist()
function M.qf_items(entries, opts)
  opts = opts or {}
  local items = {}
  for _, e in ipairs(M.commits(entries)) do
    local commit = e.commit or {}
    local sha = str(commit.sha)
    local hunk = M.primary_hunk(e)
    local author = type(commit.author) == "table" and commit.author or {}
    local item = {
      filename = M.buffer_name(sha),
      module = str(commit.short_sha, sha:sub(1, 7)),
      text = ("%s · %s, %s · %s%s"):format(
        str(commit.subject, "(no subject)"),
        str(author.name),
        M.relative_date(str(commit.date), opts.now),
        M.why(e),
        M.fate(e) ~= "" and (" · " .. M.fate(e)) or ""
      ),
      user_data = { sha = sha, path = hunk and hunk.path or nil, new_start = hunk and hunk.new_start or nil },
      valid = 1,
    }
    local lnum = opts.lnums and opts.lnums[sha]
    local pattern = M.hunk_pattern(hunk)
    if lnum then
      item.lnum = lnum
    elseif pattern then
      item.pattern = pattern
    else
      item.lnum = 1
    end
    if opts.bufnrs and opts.bufnrs[sha] then
      item.bufnr = opts.bufnrs[sha]
      item.filename = nil
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

local PHASES = {
  history = { "indexing history", "commits" },
  merge_paths = { "listing merges", "merges" },
  merges = { "diffing merges", "merges" },
  symbols = { "attaching symbols", "commits" },
  texts = { "storing commit texts", "commits" },
  message_index = { "indexing messages", "commits" },
  dense = { "embedding", "files" },
  messages = { "embedding messages", "commits" },
}

--- "1,522"
function M.thousands(n)
  local s = tostring(math.floor(tonumber(n) or 0))
  local out = s:reverse():gsub("(%d%d%d)", "%1,"):reverse()
  return (out:gsub("^,", ""))
end

--- One line with units: "indexing history 1,000/1,522 commits", "embedding 512/4,635 files".
--- @param status table a backstory/status payload
--- @return string
function M.progress_text(status)
  local phase = present(status.phase) and status.phase or "history"
  local words = PHASES[phase] or { "indexing (" .. tostring(phase) .. ")", "items" }
  local done, total = tonumber(status.done), tonumber(status.total)
  if done and total and total > 0 then
    return ("%s %s/%s %s"):format(words[1], M.thousands(done), M.thousands(total), words[2])
  end
  return words[1] .. "…"
end

--- Short status text: "Backstory: indexing history 120/5,000 commits", "Backstory: ready".
--- @param status table|nil a backstory/status payload
--- @return string
function M.status_text(status)
  if type(status) ~= "table" or not present(status.state) then
    return ""
  end
  local state = status.state
  if state == "indexing" then
    return "Backstory: " .. M.progress_text(status)
  elseif state == "no-repo" then
    return "Backstory: no repository"
  elseif state == "ready" and tonumber(status.commits_behind_head) and tonumber(status.commits_behind_head) > 0 then
    return ("Backstory: %s commits behind"):format(M.thousands(status.commits_behind_head))
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
