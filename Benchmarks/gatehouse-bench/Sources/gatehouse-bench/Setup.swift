import ArgumentParser
import Foundation

/// `setup`: creates confirmed accounts by signing up, reading each code from the outbox and verifying it.
struct Setup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create confirmed accounts: sign up, read each code from the outbox, verify.",
        discussion:
            "Writes the addresses, one a line, to --out, else to standard output and the result line to standard error."
    )

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var passwordOption: PasswordOption

    @Option(help: "The server's outbox folder, <data-dir>/outbox.")
    var outbox: String

    @Option(help: "How many accounts to create.")
    var accounts: Int = 64

    @Option(help: "File to write the addresses to.")
    var out: String?

    @Option(help: "Sign-ups in flight at once; each writes a mail to disk, which bounds the rate.")
    var parallel: Int = 4

    @Option(help: "Seconds to wait for each account's mail.")
    var mailTimeout: Double = 30

    /// Summary of one setup, for `--json`.
    struct Result: Encodable {
        let command = "setup"
        let accounts: Int
        let failed: Int
        let skipped: Int
        let seconds: Double
    }

    /// What became of one address.
    enum Outcome: Sendable {
        case created
        case failed(String)
        case skipped
    }

    /// Checks the counts before anything is sent.
    func validate() throws {
        guard (1...100_000).contains(accounts) else { throw ValidationError("--accounts must be 1...100000") }
        guard (1...256).contains(parallel) else { throw ValidationError("--parallel must be 1...256") }
        guard mailTimeout > 0 else { throw ValidationError("--mail-timeout must be positive") }
    }

    /// Creates the accounts, writes the addresses, and fails if any account could not be made.
    func run() async throws {
        let password = try passwordOption.resolve()
        let base = try connection.baseURL()
        // A fresh tag per setup: sign-up has a per-address cooldown, so addresses must never repeat.
        let tag = String(UInt64.random(in: 0..<(1 << 40)), radix: 16)
        let emails = (0..<accounts).map { "bench-\(tag)-\($0)@example.com" }
        let mail = Outbox(directory: outbox)
        let clock = ContinuousClock()
        let began = clock.now
        let parallel = min(parallel, accounts)
        let mailTimeout = Duration.seconds(mailTimeout)

        let requestTimeout = try connection.requestTimeout()
        let outcomes = try await AuthAPI.with(base: base, connections: parallel, timeout: requestTimeout) { api in
            try await withThrowingTaskGroup(of: (Int, Outcome).self) { group in
                var next = 0
                var outcomes = [Outcome](repeating: .skipped, count: emails.count)
                /// Starts the next sign-up, if any is left.
                func add() {
                    // A bounded window of sign-ups: enough to overlap the mail writes, few enough not to queue.
                    guard next < emails.count else { return }
                    let index = next
                    next += 1
                    group.addTask {
                        do {
                            try await Self.create(
                                email: emails[index], password: password, api: api, mail: mail, wait: mailTimeout)
                            return (index, .created)
                        } catch {
                            return (index, .failed("\(error)"))
                        }
                    }
                }
                for _ in 0..<parallel { add() }
                while let (index, outcome) = try await group.next() {
                    outcomes[index] = outcome
                    // After a failure the rest would most likely fail alike, each only after its timeout.
                    if case .created = outcome { add() }
                }
                return outcomes
            }
        }

        let elapsed = clock.now - began
        var created: [String] = []
        var failed = 0
        for (email, outcome) in zip(emails, outcomes) {
            switch outcome {
            case .created:
                created.append(email)
            case .failed(let reason):
                failed += 1
                Report.warn("\(email): \(reason)")
            case .skipped:
                break
            }
        }
        let skipped = emails.count - created.count - failed
        if skipped > 0 { Report.warn("stopped after the first failure: \(skipped) accounts not attempted") }
        let listing = created.map { $0 + "\n" }.joined()
        if let out {
            try listing.write(toFile: out, atomically: true, encoding: .utf8)
        } else {
            FileHandle.standardOutput.write(Data(listing.utf8))
        }
        let seconds = elapsed.inSeconds
        let line =
            connection.json
            ? try Report.jsonLine(Result(accounts: created.count, failed: failed, skipped: skipped, seconds: seconds))
            : "setup: accounts=\(created.count) failed=\(failed) skipped=\(skipped) "
                + "seconds=\(String(format: "%.2f", seconds))" + (out.map { " out=\($0)" } ?? "")
        // With no --out the addresses own standard output, so the result line moves to standard error.
        if out == nil {
            FileHandle.standardError.write(Data((line + "\n").utf8))
        } else {
            print(line)
        }
        if created.count < emails.count { throw ExitCode.failure }
    }

    /// Signs one address up, waits for its code and verifies it, which confirms the account.
    static func create(email: String, password: String, api: AuthAPI, mail: Outbox, wait: Duration) async throws {
        let signUp = try await api.signUp(email: email, password: password)
        guard signUp.isSuccess else { throw BenchError("sign-up: \(signUp.problem)") }
        let code = try await mail.code(for: email, within: wait)
        let verified = try await api.verifySignUp(email: email, code: code)
        guard verified.isSuccess else { throw BenchError("verify: \(verified.problem)") }
        _ = try verified.sessionTokens()
    }
}
