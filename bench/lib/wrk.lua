-- Request driver for wrk. args[1]: a request file, one request a line, tab-separated:
--   METHOD  PATH  TOKEN  IDEMPOTENCY-KEY  BODY
-- Requests are sent round-robin. A body or key containing {n} is a template: {n} becomes args[2] .. a
-- counter, so each request creates a distinct subscriber (with a key of its own). done() prints one
-- machine-readable summary line.
local fixed = {}
local templates = {}
local prefix = ""
local n = 0

function init(args)
  prefix = args[2] or ""
  for line in io.lines(args[1]) do
    local method, path, token, key, body = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$")
    if method then
      local headers = {}
      if token ~= "" then headers["Authorization"] = "Bearer " .. token end
      if key ~= "" then headers["Idempotency-Key"] = key end
      if body ~= "" then headers["Content-Type"] = "application/json" end
      if body:find("{n}", 1, true) or key:find("{n}", 1, true) then
        table.insert(templates, { method, path, headers, body, key })
      else
        table.insert(fixed, wrk.format(method, path, headers, body ~= "" and body or nil))
      end
    end
  end
end

function request()
  n = n + 1
  if #templates > 0 then
    local t = templates[(n % #templates) + 1]
    local body = t[4]:gsub("{n}", prefix .. n)
    if t[5] ~= "" then t[3]["Idempotency-Key"] = t[5]:gsub("{n}", prefix .. n) end
    return wrk.format(t[1], t[2], t[3], body ~= "" and body or nil)
  end
  return fixed[(n % #fixed) + 1]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {"requests":%d,"duration_us":%d,"status_errors":%d,"socket_errors":%d,"timeouts":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"mean_us":%.1f,"max_us":%d}\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.mean, latency.max))
end
