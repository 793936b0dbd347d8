-- Tiny test harness for `nvim --headless -u NONE -l tests/nvim/<x>.lua`.
-- Each test is recorded; at the end, JSON goes to stdout and nvim exits 0 (all ok) or 1.
local T = { results = {} }

function T.test(name, fn)
  local start = vim.uv.hrtime()
  local ok, err = xpcall(fn, debug.traceback)
  local ms = math.floor((vim.uv.hrtime() - start) / 1e6)
  table.insert(T.results, { name = name, ok = ok, err = ok and vim.NIL or tostring(err), ms = ms })
end

function T.eq(expected, actual, what)
  if not vim.deep_equal(expected, actual) then
    error(("%sexpected %s, got %s"):format(what and (what .. ": ") or "", vim.inspect(expected), vim.inspect(actual)), 2)
  end
end

function T.truthy(v, what)
  if not v then
    error((what or "expected a truthy value") .. ", got " .. vim.inspect(v), 2)
  end
end

function T.contains(haystack, needle, what)
  if type(haystack) ~= "string" or not haystack:find(needle, 1, true) then
    error(("%sexpected %s to contain %s"):format(what and (what .. ": ") or "", vim.inspect(haystack), vim.inspect(needle)), 2)
  end
end

function T.finish(extra)
  local failed = 0
  for _, r in ipairs(T.results) do
    if not r.ok then
      failed = failed + 1
    end
  end
  local out = { results = T.results, failed = failed, extra = extra or vim.NIL }
  io.stdout:write(vim.json.encode(out) .. "\n")
  io.stdout:flush()
  os.exit(failed == 0 and 0 or 1)
end

return T
