import ArgumentParser
import Foundation
import NIOCore

/// The endpoint a run loops on.
enum Scenario: String, CaseIterable, ExpressibleByArgument, Sendable {
    case noop, password, refresh, user
    /// Each request is two refreshes of the same token at once, as apps send after a wake-up: both must answer the
    /// same successor (the grace window). Its requests/s count both.
    case refreshRace = "refresh-race"

    /// Whether each worker needs a session before the clock starts.
    var needsSession: Bool { self != .noop && self != .password }
}

/// `run`: drives one scenario with a fixed number of workers and reports throughput and latency.
struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load one endpoint and report requests/s and latency percentiles.",
        discussion: """
            noop: GET /. password: password sign-ins. refresh: each worker signs in once, then rotates its own \
            refresh token. refresh-race: the same, sending each token twice at once (both answers must name the same \
            successor; each pair counts as two requests). user: each worker signs in once, then GET /auth/v1/user. \
            Each worker has one request \
            in flight at a time; worker i uses account i modulo the accounts in the file. Exits 1 unless every \
            measured request was answered with 2xx.
            """
    )

    @Argument(help: "noop, password, refresh, refresh-race or user.")
    var scenario: Scenario

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var passwordOption: PasswordOption

    @Option(help: "Addresses of confirmed accounts, one a line, as `setup` writes them (not needed for noop).")
    var accountsFile: String?

    @Option(help: "Workers, each with one request in flight at a time.")
    var concurrency: Int = 32

    @Option(help: "Seconds measured.")
    var seconds: Double = 10

    @Option(help: "Seconds run first and not recorded, to fill connection pools and caches.")
    var warmup: Double = 2

    @Option(
        help:
            "Requests per second to offer in all, on a fixed schedule; latency then counts from the scheduled time."
    )
    var rate: Double?

    /// Keeps every run bounded in time and size.
    func validate() throws {
        guard (1...4096).contains(concurrency) else { throw ValidationError("--concurrency must be 1...4096") }
        guard seconds > 0, seconds <= 3600 else { throw ValidationError("--seconds must be in (0, 3600]") }
        guard warmup >= 0, warmup <= 600 else { throw ValidationError("--warmup must be in [0, 600]") }
        if let rate {
            guard rate > 0, rate <= 1_000_000 else { throw ValidationError("--rate must be in (0, 1000000]") }
        }
        if scenario != .noop, accountsFile == nil {
            throw ValidationError("\(scenario.rawValue) needs --accounts-file")
        }
    }

    /// Prepares the workers, runs them, prints the result, and exits 1 when the run is not valid.
    func run() async throws {
        let base = try connection.baseURL()
        let accounts = scenario == .noop ? [] : try loadAccounts()
        let password = scenario == .noop ? "" : try passwordOption.resolve()
        let plan = LoadPlan(
            scenario: scenario, concurrency: concurrency, warmup: .seconds(warmup), measured: .seconds(seconds),
            rate: rate)
        let (records, measureFrom) = try await AuthAPI.with(
            base: base, connections: concurrency, timeout: try connection.requestTimeout()
        ) { api in
            let driver = LoadDriver(api: api, plan: plan, password: password)
            // Sessions are made before the clock starts, so no sign-in is counted in another scenario's figures.
            let states = try await driver.prepareAll(accounts: accounts)
            return await driver.runAll(states)
        }
        let result = RunResult(plan: plan, records: records, measureFrom: measureFrom)
        print(connection.json ? try Report.jsonLine(result) : result.line)
        guard result.valid else {
            for sample in Set(records.flatMap(\.errorSamples)).sorted().prefix(5) {
                Report.warn("\(scenario.rawValue): \(sample)")
            }
            Report.warn(
                "\(scenario.rawValue): not a valid run: \(result.non2xx) non-2xx answers, \(result.errors) errors, "
                    + "\(result.warmupFailures) failures during warm-up, \(result.requests) measured requests")
            throw ExitCode.failure
        }
    }

    /// The addresses in `--accounts-file`, skipping blank lines and `#` comments.
    func loadAccounts() throws -> [String] {
        guard let path = accountsFile else { throw ValidationError("\(scenario.rawValue) needs --accounts-file") }
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw BenchError("cannot read \(path): \(error.localizedDescription)")
        }
        let accounts = text.split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
        guard !accounts.isEmpty else { throw BenchError("\(path) lists no accounts") }
        return accounts
    }
}

/// What to run: the scenario, the number of workers, the phases and the optional fixed rate.
struct LoadPlan: Sendable {
    let scenario: Scenario
    let concurrency: Int
    let warmup: Duration
    let measured: Duration
    let rate: Double?
}

/// What one worker keeps between requests: its account and its own tokens.
struct WorkerState: Sendable {
    var email: String?
    var signInBody: ByteBuffer?
    var tokens: SessionTokens?
}

/// What one worker measured.
struct WorkerRecord: Sendable {
    /// Nanoseconds of every measured request that got an answer, whatever its status.
    var latencies: [Int64] = []
    /// Measured answers other than 2xx, by status.
    var failures: [Int: Int] = [:]
    /// Measured requests that got no answer (timeout, connection lost).
    var errors = 0
    var errorSamples: [String] = []
    var warmupFailures = 0
    /// Sends more than 1 ms behind schedule in a fixed-rate run.
    var late = 0
    /// New sign-ins after a failed refresh or user request.
    var resignIns = 0
    var lastCompletion: ContinuousClock.Instant?

    /// Keeps a few distinct messages for the report, never a body.
    mutating func sample(_ message: String) {
        if errorSamples.count < 5, !errorSamples.contains(message) { errorSamples.append(message) }
    }
}

/// Runs the workers of one plan against one server.
struct LoadDriver: Sendable {
    let api: AuthAPI
    let plan: LoadPlan
    let password: String

    /// One state per worker, made concurrently; worker i takes account i modulo the count.
    func prepareAll(accounts: [String]) async throws -> [WorkerState] {
        try await withThrowingTaskGroup(of: (Int, WorkerState).self) { group in
            for index in 0..<plan.concurrency {
                let email = accounts.isEmpty ? nil : accounts[index % accounts.count]
                group.addTask { (index, try await prepare(email: email)) }
            }
            var states = [WorkerState?](repeating: nil, count: plan.concurrency)
            for try await (index, state) in group { states[index] = state }
            return states.compactMap { $0 }
        }
    }

    /// A worker's account, its sign-in body made once, and a session when the scenario needs one.
    func prepare(email: String?) async throws -> WorkerState {
        var state = WorkerState(
            email: email, signInBody: email.map { AuthAPI.passwordBody(email: $0, password: password) })
        if plan.scenario.needsSession { state.tokens = try await signIn(state) }
        return state
    }

    /// A password sign-in of the worker's account.
    func signIn(_ state: WorkerState) async throws -> SessionTokens {
        guard let body = state.signInBody, let email = state.email else {
            throw BenchError("no account to sign in with")
        }
        do {
            return try (try await api.signIn(body: body)).sessionTokens()
        } catch {
            throw BenchError("sign-in of \(email): \(error)")
        }
    }

    /// Starts every worker at once and returns their records and the instant measuring began.
    func runAll(_ states: [WorkerState]) async -> ([WorkerRecord], ContinuousClock.Instant) {
        let start = ContinuousClock.now
        let records = await withTaskGroup(of: WorkerRecord.self) { group in
            for (index, state) in states.enumerated() {
                group.addTask { await drive(worker: index, state: state, start: start) }
            }
            var records: [WorkerRecord] = []
            for await record in group { records.append(record) }
            return records
        }
        return (records, start + plan.warmup)
    }

    /// One worker's loop: one request at a time until the measured phase ends.
    func drive(worker index: Int, state initial: WorkerState, start: ContinuousClock.Instant) async -> WorkerRecord {
        let clock = ContinuousClock()
        var state = initial
        var record = WorkerRecord()
        record.latencies.reserveCapacity(4096)
        let measureFrom = start + plan.warmup
        let stopAt = measureFrom + plan.measured
        // At a fixed rate R, worker i sends at start + (i + k·C)/R, so together the workers spread R a second evenly.
        let interval = plan.rate.map { Duration.seconds(Double(plan.concurrency) / $0) }
        let phase = plan.rate.map { Duration.seconds(Double(index) / $0) } ?? .zero
        var sent = 0
        while !Task.isCancelled {
            var began = clock.now
            if let interval {
                let scheduled = start + phase + interval * sent
                guard scheduled < stopAt else { break }
                if began < scheduled {
                    try? await Task.sleep(until: scheduled, clock: clock)
                } else if began - scheduled > .milliseconds(1), scheduled >= measureFrom {
                    record.late += 1
                }
                // Counting from the schedule keeps time spent waiting behind a slow answer in the latency
                // (no coordinated omission).
                began = scheduled
            } else {
                guard began < stopAt else { break }
            }
            sent += 1
            let measured = began >= measureFrom
            var succeeded = false
            do {
                let reply = try await perform(state)
                let finished = clock.now
                succeeded = reply.isSuccess
                if measured {
                    record.latencies.append((finished - began).inNanoseconds)
                    record.lastCompletion = finished
                    if !succeeded {
                        record.failures[reply.status, default: 0] += 1
                        record.sample(reply.problem)
                    }
                } else if !succeeded {
                    record.warmupFailures += 1
                    record.sample("warm-up: \(reply.problem)")
                }
                if succeeded, plan.scenario == .refresh || plan.scenario == .refreshRace {
                    state.tokens = try reply.sessionTokens()
                }
            } catch {
                // Also after a 2xx whose body was not a session: the worker's token is then unknown.
                succeeded = false
                if measured { record.errors += 1 } else { record.warmupFailures += 1 }
                record.sample("\(error)")
            }
            if !succeeded, plan.scenario.needsSession {
                // A failed refresh may have rotated or revoked the token: only a new session is sure to work.
                do {
                    state.tokens = try await signIn(state)
                    record.resignIns += 1
                } catch {
                    record.sample("\(error)")
                    try? await Task.sleep(for: .milliseconds(100))
                }
            }
        }
        return record
    }

    /// Sends the scenario's request with the worker's current tokens.
    func perform(_ state: WorkerState) async throws -> Reply {
        switch plan.scenario {
        case .noop:
            return try await api.noop()
        case .password:
            guard let body = state.signInBody else { throw BenchError("no account") }
            return try await api.signIn(body: body)
        case .refresh:
            guard let tokens = state.tokens else { throw BenchError("no session") }
            return try await api.refresh(tokens.refreshToken)
        case .user:
            guard let tokens = state.tokens else { throw BenchError("no session") }
            return try await api.user(accessToken: tokens.accessToken)
        case .refreshRace:
            guard let tokens = state.tokens else { throw BenchError("no session") }
            async let first = api.refresh(tokens.refreshToken)
            async let second = api.refresh(tokens.refreshToken)
            let (one, two) = try await (first, second)
            guard one.isSuccess else { return one }
            guard two.isSuccess else { return two }
            guard try one.sessionTokens().refreshToken == two.sessionTokens().refreshToken else {
                throw BenchError("the two racing refreshes answered different successors")
            }
            return one
        }
    }
}

/// The figures of one run, as printed.
struct RunResult: Encodable {
    let scenario: String
    let concurrency: Int
    let offeredRate: Double?
    let requests: Int
    let non2xx: Int
    let statuses: [String: Int]
    let errors: Int
    let warmupFailures: Int
    let late: Int?
    let resignIns: Int
    let seconds: Double
    let requestsPerSecond: Double
    let latencyMs: LatencySummary
    let valid: Bool

    /// Merges the workers' records into the figures.
    init(plan: LoadPlan, records: [WorkerRecord], measureFrom: ContinuousClock.Instant) {
        var latencies: [Int64] = []
        latencies.reserveCapacity(records.reduce(0) { $0 + $1.latencies.count })
        var failures: [Int: Int] = [:]
        for record in records {
            latencies.append(contentsOf: record.latencies)
            failures.merge(record.failures, uniquingKeysWith: +)
        }
        latencies.sort()
        // The measured time runs from the end of warm-up to the last answer, so a request begun before the end
        // and answered after it counts in both the requests and the time.
        let last = records.compactMap(\.lastCompletion).max()
        let elapsed = last.map { Swift.max($0 - measureFrom, plan.measured) } ?? plan.measured
        scenario = plan.scenario.rawValue
        concurrency = plan.concurrency
        offeredRate = plan.rate
        // A racing pair is two requests; its latency is the pair's.
        requests = latencies.count * (plan.scenario == .refreshRace ? 2 : 1)
        non2xx = failures.values.reduce(0, +)
        statuses = Dictionary(uniqueKeysWithValues: failures.map { (String($0.key), $0.value) })
        errors = records.reduce(0) { $0 + $1.errors }
        warmupFailures = records.reduce(0) { $0 + $1.warmupFailures }
        late = plan.rate == nil ? nil : records.reduce(0) { $0 + $1.late }
        resignIns = records.reduce(0) { $0 + $1.resignIns }
        seconds = (elapsed.inSeconds * 1000).rounded() / 1000
        requestsPerSecond = (Double(requests) / elapsed.inSeconds * 10).rounded() / 10
        latencyMs = LatencySummary(sorted: latencies)
        valid = requests > 0 && non2xx == 0 && errors == 0 && warmupFailures == 0
    }

    /// The one-line text form.
    var line: String {
        /// Milliseconds with two decimals and the unit.
        func ms(_ value: Double) -> String { String(format: "%.2fms", value) }
        var text =
            "\(scenario): requests=\(requests) non2xx=\(non2xx) errors=\(errors) "
            + "rps=\(String(format: "%.1f", requestsPerSecond)) p50=\(ms(latencyMs.p50)) p90=\(ms(latencyMs.p90)) "
            + "p99=\(ms(latencyMs.p99)) max=\(ms(latencyMs.max)) concurrency=\(concurrency) "
            + "seconds=\(String(format: "%.2f", seconds))"
        if let offeredRate {
            text += " offered=\(String(format: "%.1f", offeredRate))/s late=\(late ?? 0)"
        }
        if non2xx > 0 {
            text +=
                " statuses="
                + statuses.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: ",")
        }
        if warmupFailures > 0 { text += " warmup_failures=\(warmupFailures)" }
        if resignIns > 0 { text += " resign_ins=\(resignIns)" }
        return text
    }
}
