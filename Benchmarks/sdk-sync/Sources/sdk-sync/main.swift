import Foundation
import GatehouseClient
import GatehouseClientTesting
import HTTPTypes
import OpenAPIRuntime
import OpenAPIURLSession

// Times a second device's first sync through GatehouseClient: signs in to the account and the company, opens an
// empty company store, and syncs it until it holds every record; then keeps the store open and syncing (its live
// stream open) for a while with nothing to do, and reports the CPU that costs.
//
//   sdk-sync URL EMAIL PASSWORD COMPANY-ID USERNAME COMPANY-PASSWORD RECORDS [PAGE-SIZE] [IDLE-SECONDS]
//
// One line out: sdk-first-sync records=… pages=… seconds=… records_per_s=… cpu_s=… peak_rss_mib=… idle_cpu_s=…
// `network_s` is the time the pull requests took from sent to their last byte (the server and the transfer; the
// store writes one page while the next is on its way, so the two overlap).

let arguments = CommandLine.arguments
guard arguments.count >= 8, let url = URL(string: arguments[1]), let expected = Int(arguments[7]) else {
    FileHandle.standardError.write(
        Data(
            "usage: sdk-sync URL EMAIL PASSWORD COMPANY-ID USERNAME COMPANY-PASSWORD RECORDS [PAGE-SIZE] [IDLE]\n".utf8)
    )
    exit(2)
}
let pageSize = arguments.count > 8 ? Int(arguments[8]) ?? 5000 : 5000
let idleSeconds = arguments.count > 9 ? Double(arguments[9]) ?? 10 : 10

/// User and system CPU seconds of this process so far.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1_000_000
}

/// The peak resident memory of this process so far, in MiB (VmHWM).
func peakMiB() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
        let kib = Double(line.split(separator: " ").dropFirst().first ?? "")
    else { return 0 }
    return kib / 1024
}

/// Times each pull request from sent to its body's last byte.
final class PullTimer: ClientMiddleware, @unchecked Sendable {
    private let lock = NSLock()
    private var total = Duration.zero

    var seconds: Double {
        lock.withLock { Double(total.components.seconds) + Double(total.components.attoseconds) / 1e18 }
    }

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        guard operationID == "syncPull" else { return try await next(request, body, baseURL) }
        let started = ContinuousClock.now
        let (response, responseBody) = try await next(request, body, baseURL)
        guard let responseBody else { return (response, nil) }
        let bytes = try await Data(collecting: responseBody, upTo: 256 << 20)
        let took = ContinuousClock.now - started
        lock.withLock { total += took }
        return (response, HTTPBody(bytes))
    }
}

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sdk-sync-\(UUID().uuidString)")
defer { try? FileManager.default.removeItem(at: directory) }

let timer = PullTimer()
let gatehouse = GatehouseClient(
    url: url, sessionStore: MemorySessionStore(), transport: URLSessionTransport(), middlewares: [timer])
try await gatehouse.auth.signIn(email: arguments[2], password: arguments[3])
try await gatehouse.companies.signIn(to: arguments[4], username: arguments[5], password: arguments[6])
let store = try await gatehouse.openCompanyStore(companyID: arguments[4], directory: directory, pageSize: pageSize)

let cpuBefore = cpuSeconds()
let started = ContinuousClock.now
let summary = try await store.sync()
let elapsed = ContinuousClock.now - started
let cpu = cpuSeconds() - cpuBefore
let held = try await store.count()
guard held == expected else {
    FileHandle.standardError.write(Data("the store holds \(held) records, not \(expected)\n".utf8))
    exit(1)
}
let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18

// Idle: syncing in the background with the live stream open and nothing to sync.
await store.startSyncing()
try await Task.sleep(for: .seconds(1))
let idleBefore = cpuSeconds()
try await Task.sleep(for: .seconds(idleSeconds))
let idle = cpuSeconds() - idleBefore
await store.close()

print(
    "sdk-first-sync records=\(held) pages=\(summary.pages) seconds=\(String(format: "%.3f", seconds))",
    "records_per_s=\(Int(Double(held) / seconds)) cpu_s=\(String(format: "%.2f", cpu))",
    "network_s=\(String(format: "%.3f", timer.seconds))",
    "peak_rss_mib=\(String(format: "%.1f", peakMiB()))",
    "idle_cpu_s=\(String(format: "%.3f", idle)) idle_s=\(Int(idleSeconds))")
