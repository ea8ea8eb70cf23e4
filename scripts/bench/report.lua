-- Shared by the bench scripts: prints one result line when wrk finishes, and counts answers
-- by status so that errors are not mistaken for speed.
statuses = {} -- global: done() reads it from each thread with thread:get
local threads = {}

function setup(thread)
    table.insert(threads, thread)
end

function response(status, headers, body)
    statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
    local codes = {}
    for _, t in ipairs(threads) do
        local s = t:get("statuses")
        for code, n in pairs(s or {}) do
            codes[code] = (codes[code] or 0) + n
        end
    end
    local parts = {}
    for code, n in pairs(codes) do
        table.insert(parts, string.format("%d=%d", code, n))
    end
    table.sort(parts)
    local secs = summary.duration / 1e6
    io.write(string.format(
        "RESULT %s: %.0f req/s, p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms, %d requests, status %s, socket errors %d\n",
        os.getenv("BENCH_NAME") or "bench", summary.requests / secs,
        latency:percentile(50) / 1000, latency:percentile(90) / 1000,
        latency:percentile(99) / 1000, latency.max / 1000, summary.requests,
        table.concat(parts, " "),
        summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
