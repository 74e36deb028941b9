-- Replays a file of pre-generated raw HTTP requests (bench/lib/request-file.ts), round-robin.
-- Signatures were computed in Node ahead of time, so wrk does no crypto and no formatting.
--
--   wrk -t T -c C -d Ds --timeout 5s -s bench/wrk/replay.lua http://127.0.0.1:PORT -- FILE T
--
-- Each thread starts at its own offset in the file, so threads do not send the same request at
-- the same moment. done() prints one line `WRKJSON {...}`: requests, duration, errors and the
-- latency percentiles in microseconds, for the runner to parse.

local threads = {}
local next_tid = 0

function setup(thread)
  thread:set("tid", next_tid)
  next_tid = next_tid + 1
  table.insert(threads, thread)
end

function init(args)
  local path = args[1]
  local nthreads = tonumber(args[2]) or 1
  -- Optional pacing: this thread sends at most `rate` requests per second, one every 1000/rate ms,
  -- each on whichever connection asks next (wrk's delay()); latency excludes the wait.
  local rate = tonumber(args[3])
  interval = rate and 1000 / rate or nil
  next_at = 0
  local f = assert(io.open(path, "rb"))
  local data = f:read("*a")
  f:close()
  reqs = {}
  local pos, n = 1, #data
  while pos <= n do
    local nl = string.find(data, "\n", pos, true)
    local len = tonumber(string.sub(data, pos, nl - 1))
    reqs[#reqs + 1] = string.sub(data, nl + 1, nl + len)
    pos = nl + len + 1
  end
  assert(#reqs > 0, "no requests in " .. path)
  idx = math.floor(#reqs * (tid or 0) / nthreads)
end

local ffi = require("ffi")
ffi.cdef[[
  typedef struct { long tv_sec; long tv_nsec; } replay_timespec;
  int clock_gettime(int clk, replay_timespec *ts);
]]
local ts = ffi.new("replay_timespec")
local function now_ms()
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end

function delay()
  if not interval then return 0 end
  local now = now_ms()
  -- A slot missed because every connection was busy is not made up later.
  next_at = math.max(next_at + interval, now)
  return next_at - now
end

function request()
  idx = idx + 1
  if idx > #reqs then idx = 1 end
  return reqs[idx]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"min":%d,"mean":%.3f,"max":%d,"stdev":%.3f,"p50":%d,"p90":%d,"p99":%d,"p999":%d}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.mean, latency.max, latency.stdev,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9)))
end
