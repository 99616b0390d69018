import Foundation
import NIOConcurrencyHelpers

/// Splits a byte stream into lines as it arrives.
final class LineBuffer: Sendable {
    private let pending = NIOLockedValueBox(Data())

    func append(_ data: Data) -> [String] {
        pending.withLockedValue { pending in
            pending.append(data)
            var lines: [String] = []
            while let newline = pending.firstIndex(of: 0x0A) {
                lines.append(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                pending.removeSubrange(pending.startIndex...newline)
            }
            return lines
        }
    }
}

extension Pipe {
    /// What the other end writes, a line at a time, until it closes.
    func lines() -> AsyncStream<String> {
        let (lines, sink) = AsyncStream.makeStream(of: String.self)
        let buffer = LineBuffer()
        fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty {
                handle.readabilityHandler = nil
                sink.finish()
            } else {
                for line in buffer.append(data) { sink.yield(line) }
            }
        }
        return lines
    }
}

/// How a process that ran to its end ended: its exit status and all it wrote.
struct ProcessOutcome {
    let status: Int32
    let stdout: String
    let stderr: String
}

extension Process {
    /// The test runner's environment, read once: a child started with no environment of its own makes Foundation read
    /// `environ` while it spawns, and one of those spawns crashed in `Process.run()` (a read of freed memory) with
    /// tests running beside it.
    static let testEnvironment = ProcessInfo.processInfo.environment
    private static let spawning = NIOLock()

    /// `run()`, one spawn at a time across the suite, with an environment given (`testEnvironment` when none is).
    func start() throws {
        if environment == nil { environment = Self.testEnvironment }
        try Self.spawning.withLock { try run() }
    }

    /// Runs the process to its end, collecting its standard output and standard error. The waiting happens on a
    /// thread of its own: blocking reads on the suite's few cooperative threads (two on a two-core machine) starved
    /// every other test's server of its readiness check.
    func runToEnd() async throws -> ProcessOutcome {
        nonisolated(unsafe) let process = self
        return try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try process.runToEndBlocking() }) }.start()
        }
    }

    /// The same on the calling thread, for the few synchronous callers (a cluster stopped in a `defer`).
    func runToEndBlocking() throws -> ProcessOutcome {
        let out = Pipe()
        let err = Pipe()
        standardOutput = out
        standardError = err
        try start()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        waitUntilExit()
        return ProcessOutcome(
            status: terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: stderr, as: UTF8.self))
    }
}
