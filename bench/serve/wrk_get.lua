-- wrk script for run.py's `--get-generator wrk`: closed-loop GETs of random preloaded ids
-- (/bench/00000 .. /bench/09999, as oha's --rand-regex-url does), and at the end one JSON
-- line in the shape run.py stores for oha (requests/s, latency percentiles in seconds,
-- status counts, errors), so report.py reads both alike.
-- Why wrk here: at 1,000 connections oha used its whole core for ~32,000 GETs/s (31 us of
-- CPU a request, `get_ab.py`), so a closed loop measured oha's ceiling, not the server's.

local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("seed", counter * 7919)
end

function init(args)
  math.randomseed(seed or 1)
end

function request()
  return wrk.format("GET", string.format("/bench/%05d", math.random(0, 9999)))
end

function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local e = summary.errors
  local ok = summary.requests - e.status
  local p = function(q) return latency:percentile(q) / 1e6 end
  io.write(string.format(
    '{"summary":{"requestsPerSec":%.3f,"total":%.6f},' ..
    '"latencyPercentiles":{"p50":%.6f,"p90":%.6f,"p99":%.6f,"p99.9":%.6f},' ..
    '"statusCodeDistribution":{"2xx":%d,"non-2xx":%d},' ..
    '"errorDistribution":{"connect":%d,"read":%d,"write":%d,"timeout":%d},' ..
    '"generator":"wrk"}\n',
    summary.requests / secs, secs, p(50), p(90), p(99), p(99.9), ok, e.status,
    e.connect, e.read, e.write, e.timeout))
end
