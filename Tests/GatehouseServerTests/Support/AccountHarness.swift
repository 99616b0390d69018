import AsyncHTTPClient
import Foundation
import GatehouseServer
import Testing

/// A Gatehouse on a fresh store with a clock the test moves. By default it answers through its router in this
/// process and mails into memory (`RouterServer`, `MemoryMailbox`), and the SDK talks to it through the same router
/// (`sdkTransport`, the live event stream included); `live: true` starts it on a loopback port mailing through a real
/// SMTP server, for what needs the socket (the SDK over URLSession, a server that goes away and comes back).
struct AccountHarness {
    let server: any TestServer
    let client: AuthClient
    let clock: TestClock
    let log: CapturedLog
    let http: any Transport
    let mailbox: any Mailbox

    /// What the SDK sends its requests through: the router in process, or (live) URLSession to the port.
    var sdkTransport: RouterClientTransport? { (server as? RouterServer).map(RouterClientTransport.init) }

    static func start(live: Bool = false, _ configure: (inout GatehouseConfiguration) -> Void = { _ in }) async throws
        -> AccountHarness
    {
        var configuration = try await TestStore.configuration()
        configuration.auth.trustedProxies = [IPNetwork("127.0.0.1")!, IPNetwork("::1")!]
        let clock = TestClock()
        let log = CapturedLog()
        let server: any TestServer
        let http: any Transport
        let mailbox: any Mailbox
        if live {
            let sink = try await SMTPSink.shared()
            configuration.smtpURL = "smtp://127.0.0.1:\(sink.port)"
            configure(&configuration)
            server = try await startLive(configuration, log: log, clock: clock)
            http = Self.http
            mailbox = sink
        } else {
            // No socket: the port only names the public URL that mailed links and pages point to.
            configuration.port = 8080
            configure(&configuration)
            // Mail goes into memory, unless the test names an SMTP server (one that is down, say).
            let memory = MemoryMailbox()
            let router = try await RouterServer.start(
                configuration, logger: log.logger, clock: clock,
                mailTransport: configuration.smtpURL == nil ? memory : nil)
            server = router
            http = router
            mailbox = memory
        }
        // Each harness is its own client address, so per-IP limits of one test never touch another.
        let ip = "10.\(Int.random(in: 0...255)).\(Int.random(in: 0...255)).\(Int.random(in: 1...254))"
        let client = AuthClient(
            http: http, base: server.baseURL,
            headers: [("User-Agent", "GatehouseTests/1.0"), ("X-Forwarded-For", ip)])
        return AccountHarness(server: server, client: client, clock: clock, log: log, http: http, mailbox: mailbox)
    }

    /// Starts a server on a loopback port and waits until it is ready.
    private static func startLive(_ configuration: GatehouseConfiguration, log: CapturedLog, clock: TestClock)
        async throws -> LiveServer
    {
        var configuration = configuration
        // Mailed links name the configured port, so take a real one rather than 0; another socket may take it
        // between the pick and the bind, so a failed start tries a new port.
        var started: LiveServer?
        for attempt in 1...5 where started == nil {
            configuration.port = try freeLoopbackPort()
            do {
                started = try await LiveServer.start(configuration, logger: log.logger, clock: clock)
            } catch  where attempt < 5 {
                continue
            }
        }
        let server = try #require(started)
        // A deadline, not a measure: twenty servers migrating at once on two cores can take a while.
        let ready = try await LiveServer.eventually(timeout: .seconds(60)) {
            try await Self.http.send(.GET, server.baseURL + "/health/ready").status == 200
        }
        #expect(ready)
        return server
    }

    /// One client for every harness, never shut down: a test that fails half-way must not leave a client to crash
    /// at deinit. It does not follow redirects, so tests see the 303 a browser would get, and nothing leaves
    /// the machine.
    /// Its pool fits the 50-way concurrency tests, and waits long enough for a suite running in parallel on 2 cores.
    static let http = HTTPClient(
        eventLoopGroupProvider: .singleton,
        configuration: HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(60), read: .seconds(60)),
            connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)))

    func stop() async throws {
        try await server.stop()
    }

    /// Runs `body` against a fresh harness and stops its server afterwards, also when `body` throws: the async
    /// counterpart of a `defer`.
    static func with(
        live: Bool = false, _ configure: (inout GatehouseConfiguration) -> Void = { _ in },
        _ body: (AccountHarness) async throws -> Void
    ) async throws {
        let h = try await start(live: live, configure)
        do {
            try await body(h)
        } catch {
            try? await h.stop()
            throw error
        }
        try await h.stop()
    }

    /// Another server on this harness's store, with the same issuer and keys (a second instance, or a restart).
    func secondInstance() async throws -> LiveServer {
        var configuration = server.services.configuration
        configuration.publicURL = configuration.effectivePublicURL
        configuration.port = 0
        return try await LiveServer.start(configuration, clock: clock)
    }

    /// A fresh address nobody else in the run uses.
    static func newEmail(_ tag: String = "user") -> String {
        "\(tag)-\(UUID().uuidString.prefix(8).lowercased())@example.com"
    }

    /// Waits for the next mail to `email` whose subject contains `subject`.
    func mail(to email: String, subject: String) async throws -> ReceivedMail {
        try await mailbox.waitForMail(to: email, subject: subject)
    }

    /// Whether an unread mail to `email` whose subject contains `subject` has arrived (it stays unread).
    func hasMail(to email: String, subject: String) async throws -> Bool {
        try await mailbox.hasMail(to: email, subject: subject)
    }

    /// Opens a mailed link as a person does: the GET shows a page and spends nothing; the page's button posts its
    /// form (from the page's own origin) and answers 303. Returns the page and the button's answer.
    func followLink(_ link: String) async throws -> (page: HTTPReply, answer: HTTPReply) {
        let page = try await http.send(.GET, link)
        let form = Self.formFields(page.body)
        var components = URLComponents()
        components.queryItems = form.map { URLQueryItem(name: $0.key, value: $0.value) }
        let body = (components.percentEncodedQuery ?? "").replacingOccurrences(of: "+", with: "%2B")
        let answer = try await http.send(
            .POST, server.baseURL + "/auth/v1/verify/continue", rawBody: body,
            headers: client.headers + [
                ("Content-Type", "application/x-www-form-urlencoded"), ("Origin", server.baseURL),
                ("Sec-Fetch-Site", "same-origin"),
            ])
        return (page, answer)
    }

    /// The hidden fields of the link page's form.
    static func formFields(_ html: String) -> [String: String] {
        var fields: [String: String] = [:]
        for match in html.matches(of: /<input type="hidden" name="([a-z_]+)" value="([^"]*)">/) {
            fields[String(match.1)] = String(match.2).replacingOccurrences(of: "&amp;", with: "&")
                .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&#39;", with: "'")
                .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
        }
        return fields
    }

    /// Signs up with a password and confirms the address with the mailed code.
    func confirmedAccount(_ email: String, password: String = "correct horse battery") async throws -> SignedIn {
        let signUp = try await client.signUp(email, password: password)
        #expect(signUp.status == 200)
        let code = try #require(try await mail(to: email, subject: "Confirm your email").code)
        let verified = try await client.verify(email, code: code, type: "signup")
        #expect(verified.status == 200)
        return try SignedIn(verified)
    }
}
