-- wrk script for Benchmarks/app-store.sh: posts the request bodies of a file (one per line) to the notification
-- endpoint in turn, from the first again when they run out; prints how many answers were not 200.
local bodies = {}
local next_body = 0

function init(args)
    for line in io.lines(args[1]) do bodies[#bodies + 1] = line end
end

function request()
    next_body = next_body % #bodies + 1
    return wrk.format("POST", "/v1/app-store/notifications", { ["Content-Type"] = "application/json" },
        bodies[next_body])
end

function done(summary, latency, requests)
    io.write(string.format("requests=%d non200=%d errors=%d seconds=%.2f rps=%.1f p50_ms=%.2f p99_ms=%.2f\n",
        summary.requests, summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write
            + summary.errors.timeout, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
        latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
