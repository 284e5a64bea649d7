-- wrk script of `make bench`. Environment: WRK_METHOD (GET), WRK_PATH (/),
-- WRK_HEADERS_FILE ("Name: value" per line), WRK_BODY_FILE (request body, sent with
-- Content-Type: application/json), WRK_VARY ("1": every request gets new query-argument and
-- cookie values, the base values with the request's number appended, as different users and
-- searches would send; headers otherwise stay; WRK_VARY_FROM: the number before the first request),
-- WRK_CORPUS (a file of bench/realistic.py: records "<length> <id>\n" + that many bytes of raw
-- HTTP/1.1; every request is the corpus's next one, in a cycle from record WRK_CORPUS_FROM).
-- Prints one line "WRK_JSON {...}" (latencies in us).
local function readfile(p)
  local f = assert(io.open(p, "rb")); local s = f:read("*a"); f:close(); return s
end
wrk.method = os.getenv("WRK_METHOD") or "GET"
wrk.path = os.getenv("WRK_PATH") or "/"
local hf = os.getenv("WRK_HEADERS_FILE")
if hf and hf ~= "" then
  for line in io.lines(hf) do
    local k, v = line:match("^([^:]+):%s*(.-)%s*$")
    if k then wrk.headers[k] = v end
  end
end
local bf = os.getenv("WRK_BODY_FILE")
if bf and bf ~= "" then
  wrk.body = readfile(bf)
  wrk.headers["Content-Type"] = "application/json"
end

if os.getenv("WRK_VARY") == "1" then
  local n = tonumber(os.getenv("WRK_VARY_FROM") or "") or 0
  local base_path, base_cookie = wrk.path, wrk.headers["Cookie"]
  request = function()
    n = n + 1
    local tag = tostring(n)
    local path = (base_path:gsub("=([^&]*)", function(v) return "=" .. v .. tag end))
    local h = {}
    for k, v in pairs(wrk.headers) do h[k] = v end
    if base_cookie then
      h["Cookie"] = (base_cookie:gsub("=([^;]*)", function(v) return "=" .. v .. tag end))
    end
    return wrk.format(nil, path, h)
  end
end

local cf = os.getenv("WRK_CORPUS")
if cf and cf ~= "" then
  local data = readfile(cf)
  local corpus, pos = {}, 1
  while pos <= #data do
    local nl = data:find("\n", pos, true)
    local len = nl and tonumber(data:sub(pos, nl - 1):match("^(%d+)"))
    assert(len, "WRK_CORPUS: bad record at byte " .. pos)
    corpus[#corpus + 1] = data:sub(nl + 1, nl + len)
    pos = nl + len + 1
  end
  assert(#corpus > 0, "WRK_CORPUS: no request")
  local n = (tonumber(os.getenv("WRK_CORPUS_FROM") or "") or 0) % #corpus
  request = function()
    n = n % #corpus + 1
    return corpus[n]
  end
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"p50":%d,"p99":%d,"p999":%d,"max":%d}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max))
end
