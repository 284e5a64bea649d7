-- wrk script of `make bench`. Environment: WRK_METHOD (GET), WRK_PATH (/),
-- WRK_HEADERS_FILE ("Name: value" per line), WRK_BODY_FILE (request body, sent with
-- Content-Type: application/json). Prints one line "WRK_JSON {...}" (latencies in us).
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
