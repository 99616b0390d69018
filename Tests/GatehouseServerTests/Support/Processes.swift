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
    /// Runs the process to its end, collecting its standard output and standard error.
    func runToEnd() throws -> ProcessOutcome {
        let out = Pipe()
        let err = Pipe()
        standardOutput = out
        standardError = err
        try run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        waitUntilExit()
        return ProcessOutcome(
            status: terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: stderr, as: UTF8.self))
    }
}
