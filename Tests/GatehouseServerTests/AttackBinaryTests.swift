import AsyncHTTPClient
import Foundation
import GatehouseServer
import Testing

/// Attacks 1–9 of the review, run as whole flows against the `gatehouse` binary, started the way an operator
/// starts it, mailing through a real SMTP server. The in-process suite covers the same findings in detail with a
/// clock it controls; here the real clock runs, so each flow is one an attacker could run in seconds.
@Suite("Attacks 1–9 against the release binary")
struct AttackBinaryTests {
    /// A running `gatehouse serve`, stopped by `stop()` (SIGTERM).
    struct Binary {
        let process: Process
        let base: String
        let client: AuthClient

        static func start(sinkPort: Int) async throws -> Binary {
            let folder = try CommandLineTests.scratchFolder()
            let port = try freeLoopbackPort()
            let process = CommandLineTests.process(
                [
                    "serve", "--port", String(port), "--data-dir", folder.appendingPathComponent("data").path,
                    "--smtp-url", "smtp://127.0.0.1:\(sinkPort)", "--trusted-proxies", "127.0.0.1",
                    "--site-url", "https://site.example", "--redirect-urls", "https://good.example*",
                    "--code-failures-per-day", "8", "--log-level", "warning",
                ], environment: [:], in: nil)
            process.standardError = FileHandle.nullDevice
            try process.start()
            let base = "http://127.0.0.1:\(port)"
            let http = AccountHarness.http
            let ready = try await LiveServer.eventually {
                (try? await http.send(.GET, base + "/health/ready").status) == 200
            }
            guard ready else {
                process.terminate()
                throw CancellationError()
            }
            return Binary(process: process, base: base, client: AuthClient(http: http, base: base))
        }

        /// A client whose requests arrive, through the trusted proxy on loopback, from `ip`.
        func from(_ ip: String) -> AuthClient {
            AuthClient(
                http: client.http, base: base, headers: [("User-Agent", "attacker/1.0"), ("X-Forwarded-For", ip)])
        }

        func stop() {
            process.terminate()
            process.waitUntilExit()
        }
    }

    @Test("attacks 1–9 as whole flows against the gatehouse binary")
    func attacks() async throws {
        let sink = try await SMTPSink.shared()
        let binary = try await Binary.start(sinkPort: sink.port)
        do {
            try await Self.run(binary, sink: sink)
        } catch {
            binary.stop()
            throw error
        }
        binary.stop()
        #expect(binary.process.terminationStatus == 0)
    }

    static func confirmed(_ binary: Binary, _ sink: SMTPSink, password: String = "correct horse battery") async throws
        -> (String, SignedIn)
    {
        let email = AccountHarness.newEmail("bin")
        let client = binary.from("192.0.2.\(Int.random(in: 1...254))")
        #expect(try await client.signUp(email, password: password).status == 200)
        let code = try #require(try await sink.waitForMail(to: email, subject: "Confirm your email").code)
        return (email, try SignedIn(try await client.verify(email, code: code, type: "signup")))
    }

    static func run(_ binary: Binary, sink: SMTPSink) async throws {
        // 1. Pre-hijack: the attacker signs up the victim's address; the victim signs in by a mailed code.
        let victim = AccountHarness.newEmail("victim")
        let attacker = binary.from("198.51.100.1")
        #expect(try await attacker.signUp(victim, password: "attacker knows this one").status == 200)
        let owner = binary.from("203.0.113.1")
        #expect(try await owner.otp(victim).status == 200)
        let code = try #require(try await sink.waitForMail(to: victim, subject: "Your sign-in code").code)
        #expect(try await owner.verify(victim, code: code, type: "magiclink").status == 200)
        #expect(try await attacker.password(victim, "attacker knows this one").status == 400)

        // 2. X-Forwarded-For: forged leftmost entries; the proxy appends the real address, which the limit counts.
        // 40 at once against a burst of 30 (sent one by one on a loaded machine, the bucket refills meanwhile).
        let forgedStatuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for attempt in 0..<40 {
                let forged = AuthClient(
                    http: binary.client.http, base: binary.base,
                    headers: [("X-Forwarded-For", "198.18.\(attempt).1, 203.0.113.250")])
                group.addTask { try await forged.password(AccountHarness.newEmail(), "a wrong password").status }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(forgedStatuses.allSatisfy { $0 == 400 || $0 == 429 })
        #expect(forgedStatuses.filter { $0 == 429 }.count >= 9)

        // 3. Redirects: a look-alike host gets the site URL in the mailed link.
        let target = AccountHarness.newEmail("redirect")
        let redirected = binary.from("203.0.113.3")
        #expect(
            try await redirected.post(
                "/auth/v1/otp?redirect_to=https%3A%2F%2Fgood.example.evil.test%2Fsteal", ["email": target]
            ).status == 200)
        let link = try #require(try await sink.waitForMail(to: target, subject: "Your sign-in code").link)
        #expect(
            URLComponents(string: link)?.queryItems?.first { $0.name == "redirect_to" }?.value == "https://site.example"
        )

        // 4. The backoff race: 30 parallel wrong passwords from 30 addresses.
        let (email, session) = try await confirmed(binary, sink)
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<30 {
                let client = binary.from("198.19.\(index).4")
                group.addTask { try await client.password(email, "wrong guess \(index)").status }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.filter { $0 == 400 }.count <= 6)
        #expect(statuses.filter { $0 == 429 }.count >= 24)

        // 5. Email change with a stolen access token alone: asked, but the address stays until the current one
        // confirms too (secure email change); the thief's own confirmation changes nothing.
        let (held, stolen) = try await confirmed(binary, sink)
        let thief = AccountHarness.newEmail("thief")
        let change = try await binary.client.put("/auth/v1/user", ["email": thief], bearer: stolen.access)
        #expect(change.status == 200 && change.json["email"] as? String == held)
        let thiefCode = try #require(
            try await sink.waitForMail(to: thief, subject: "Confirm your new email address").code)
        #expect(
            try await binary.client.verify(thief, code: thiefCode, type: "email_change").json["access_token"] == nil)
        #expect(try await binary.client.user(stolen.access).json["email"] as? String == held)

        // 6. Guessing the current password through the password change: 8 guesses at once; 3 are checked (400), then
        // the backoff answers 429 (one by one on a loaded machine, its first delays could pass between guesses).
        let (_, guessed) = try await confirmed(binary, sink)
        let guesses = try await withThrowingTaskGroup(of: Int.self) { group in
            for attempt in 0..<8 {
                let guesser = binary.from("198.51.100.6")
                group.addTask {
                    try await guesser.put(
                        "/auth/v1/user",
                        ["password": "a new passphrase \(attempt)", "current_password": "guess \(attempt)"],
                        bearer: guessed.access
                    ).status
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(guesses.allSatisfy { $0 == 400 || $0 == 429 })
        #expect(guesses.contains(400))
        #expect(guesses.filter { $0 == 429 }.count >= 3)

        // 7. Company sessions: refused on the account endpoints, and ended with their account session.
        let created = try await binary.client.createCompany("Binary Co", bearer: session.access)
        let cid = try #require(created.json["id"] as? String)
        #expect(
            try await binary.client.createCredential(
                cid, username: "boss", password: "company secret 1", bearer: session.access
            )
            .status == 201)
        let company = try SignedIn(
            try await binary.client.companyLogin(
                cid, username: "boss", password: "company secret 1", bearer: session.access))
        #expect(try await binary.client.user(company.access).status == 403)
        #expect(try await binary.client.logout(session.access, scope: "local").status == 204)
        #expect(try await binary.client.get("/v1/companies/\(cid)", bearer: company.access).status == 403)

        // 8. Enumeration: recovery and sign-up answer alike for taken and free addresses.
        // The taken address is confirmed by a sign-in code, so no sign-up cooldown of its own is running.
        let taken = AccountHarness.newEmail("taken")
        let holder = binary.from("203.0.113.8")
        #expect(try await holder.otp(taken).status == 200)
        let takenCode = try #require(try await sink.waitForMail(to: taken, subject: "Your sign-in code").code)
        #expect(try await holder.verify(taken, code: takenCode, type: "magiclink").status == 200)
        let free = AccountHarness.newEmail("free")
        let probe = binary.from("198.51.100.8")
        let recoverTaken = try await probe.post("/auth/v1/recover", ["email": taken])
        let recoverFree = try await probe.post("/auth/v1/recover", ["email": free])
        #expect(recoverTaken.status == recoverFree.status && recoverTaken.body == recoverFree.body)
        let signUpTaken = try await probe.signUp(taken, password: "some passphrase 9")
        let signUpFree = try await probe.signUp(free, password: "some passphrase 9")
        #expect(signUpTaken.status == 200 && signUpFree.status == 200)
        #expect(Set(signUpTaken.json.keys) == Set(signUpFree.json.keys))

        // 9. Code guessing across codes: 5 wrong sign-in codes, 3 wrong recovery codes, then even the right one waits.
        let (guessedEmail, _) = try await confirmed(binary, sink)
        let guesser = binary.from("198.51.100.9")
        #expect(try await guesser.otp(guessedEmail).status == 200)
        let first = try #require(try await sink.waitForMail(to: guessedEmail, subject: "Your sign-in code").code)
        for guess in 0..<5 {
            let wrong = String(format: "%06d", (Int(first)! + 1 + guess) % 1_000_000)
            #expect(try await guesser.verify(guessedEmail, code: wrong, type: "magiclink").status == 403)
        }
        #expect(try await guesser.post("/auth/v1/recover", ["email": guessedEmail]).status == 200)
        let second = try #require(try await sink.waitForMail(to: guessedEmail, subject: "Reset your password").code)
        for guess in 0..<3 {
            let wrong = String(format: "%06d", (Int(second)! + 1 + guess) % 1_000_000)
            #expect(try await guesser.verify(guessedEmail, code: wrong, type: "recovery").status == 403)
        }
        #expect(try await guesser.verify(guessedEmail, code: second, type: "recovery").status == 429)
    }
}
