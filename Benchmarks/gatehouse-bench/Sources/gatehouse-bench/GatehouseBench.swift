import ArgumentParser
import Foundation

/// `gatehouse-bench`: creates benchmark accounts on a Gatehouse server and measures its auth endpoints under load.
@main
struct GatehouseBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatehouse-bench",
        abstract: "Load generator for Gatehouse's auth endpoints (loopback servers only).",
        subcommands: [Setup.self, Run.self, Sync.self]
    )
}

/// Where the server is and how long one request may take; shared by every subcommand.
struct ConnectionOptions: ParsableArguments {
    @Option(help: "Base URL of the server, on a loopback address.")
    var url: String = "http://127.0.0.1:8080"

    @Option(help: "Seconds after which one request is abandoned and counted as an error.")
    var timeout: Double = 30

    @Flag(help: "Print the result as one JSON object instead of the text line.")
    var json = false

    /// The URL without a trailing slash, refused unless it names a loopback host.
    func baseURL() throws -> String {
        // A load generator pointed elsewhere by mistake would be an attack, so there is deliberately no override.
        guard let components = URLComponents(string: url), let scheme = components.scheme,
            ["http", "https"].contains(scheme.lowercased()), let host = components.host?.lowercased()
        else {
            throw ValidationError("--url must be an http:// URL, got \(url)")
        }
        let loopback = host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
        guard loopback else {
            throw ValidationError("--url must name a loopback host (127.0.0.0/8, localhost or ::1), got \(host)")
        }
        return url.hasSuffix("/") ? String(url.dropLast()) : url
    }

    /// The per-request timeout, validated.
    func requestTimeout() throws -> Double {
        guard timeout > 0, timeout <= 600 else { throw ValidationError("--timeout must be in (0, 600] seconds") }
        return timeout
    }
}

/// The password of the benchmark accounts, which is never printed.
struct PasswordOption: ParsableArguments {
    @Option(help: "Password of every benchmark account; GATEHOUSE_BENCH_PASSWORD is read when it is not given.")
    var password: String?

    /// The flag, else the environment variable, which keeps the password out of process listings.
    func resolve() throws -> String {
        if let password, !password.isEmpty { return password }
        if let value = ProcessInfo.processInfo.environment["GATEHOUSE_BENCH_PASSWORD"], !value.isEmpty {
            return value
        }
        throw ValidationError("give --password or set GATEHOUSE_BENCH_PASSWORD")
    }
}

/// A failure worth one line on standard error.
struct BenchError: Error, CustomStringConvertible {
    let description: String

    /// Wraps a message.
    init(_ description: String) {
        self.description = description
    }
}

/// Output helpers shared by the subcommands.
enum Report {
    /// Writes one line to standard error, where diagnostics go so standard output stays machine-readable.
    static func warn(_ line: String) {
        FileHandle.standardError.write(Data("gatehouse-bench: \(line)\n".utf8))
    }

    /// Encodes `value` as one line of JSON with sorted keys, so successive runs diff cleanly.
    static func jsonLine(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}
