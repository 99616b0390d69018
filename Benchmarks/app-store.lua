-- wrk script for Benchmarks/app-store.sh and id-token.sh: posts the request bodies of a file (one per line) to a
-- path (the App Store notification endpoint unless a second argument names another) in turn, from the first again
-- when they run out, each from an X-Forwarded-For address of its own so per-IP limits stay out of the measurement;
-- prints how many answers were not 200.
local bodies = {}
local next_body = 0
local path = "/v1/app-store/notifications"

function init(args)
    for line in io.lines(args[1]) do bodies[#bodies + 1] = line end
    if args[2] then path = args[2] end
end

function request()
    next_body = next_body % #bodies + 1
    return wrk.format("POST", path, {
        ["Content-Type"] = "application/json",
        ["X-Forwarded-For"] = "10." .. (next_body % 250) .. "." .. math.random(0, 250) .. "." .. math.random(1, 250),
    }, bodies[next_body])
end

function done(summary, latency, requests)
    io.write(string.format("requests=%d non200=%d errors=%d seconds=%.2f rps=%.1f p50_ms=%.2f p99_ms=%.2f\n",
        summary.requests, summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write
            + summary.errors.timeout, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
        latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
