import Foundation
import GatehouseJSON
import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import GatehouseServer

/// An auth hook endpoint: `Tests/hooks/receiver.py` on a loopback port. It checks every call's Standard Webhooks
/// signature with the PyPI `standardwebhooks` package (a call that does not verify is answered 401, which fails the
/// request), answers as the test says per path, and logs every call.
final class HookReceiver {
    private let peer: PythonPeer
    private let folder: TemporaryFolder
    private let routes = NIOLockedValueBox([String: [String: Any]]())
    /// The `whsec_` secret every path verifies with, and its key bytes for Gatehouse's settings.
    let secret: String
    let key: [UInt8]

    private init(peer: PythonPeer, folder: TemporaryFolder) {
        self.peer = peer
        self.folder = folder
        key = (0..<32).map { _ in UInt8.random(in: .min ... .max) }
        secret = "whsec_" + Data(key).base64EncodedString()
    }

    static func start() async throws -> HookReceiver {
        let folder = try TemporaryFolder()
        try Data(#"{"paths": {}}"#.utf8).write(to: URL(fileURLWithPath: folder.path + "/hooks.json"))
        let peer = try await PythonPeer.start(
            PythonPeer.script("hooks/receiver.py"),
            arguments: [folder.path + "/hooks.json", folder.path + "/calls.jsonl"],
            failure: "the hook receiver did not start (is standardwebhooks installed? scripts/requirements-test.txt)")
        return HookReceiver(peer: peer, folder: folder)
    }

    func stop() { peer.stop() }

    func url(_ path: String) -> String { "http://127.0.0.1:\(peer.port)\(path)" }

    /// The endpoint settings for `path`, signed with this receiver's secret.
    func endpoint(_ path: String) -> AuthHookEndpoint {
        var endpoint = AuthHookEndpoint()
        endpoint.uri = url(path)
        endpoint.secrets = [key]
        return endpoint
    }

    /// How `path` answers from now on (see Tests/hooks/receiver.py).
    func answer(_ path: String, _ answer: [String: Any]) throws {
        let data = try routes.withLockedValue { routes in
            routes[path] = ["secret": secret, "answer": answer]
            return try JSONSerialization.data(withJSONObject: ["paths": routes])
        }
        try data.write(to: URL(fileURLWithPath: folder.path + "/hooks.json"), options: .atomic)
    }

    /// Every call to `path` so far, oldest first: `verified`, `headers`, `body`.
    func calls(_ path: String) -> [[String: Any]] {
        let text = (try? String(contentsOfFile: folder.path + "/calls.jsonl", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
        }.filter { $0["path"] as? String == path }
    }

    /// The input of the last call to `path`.
    func lastInput(_ path: String) throws -> [String: Any] {
        try #require(calls(path).last?["body"] as? [String: Any])
    }
}

/// Runs `body` with a hook receiver, stopped however it ends.
private func withReceiver(_ body: (HookReceiver) async throws -> Void) async throws {
    let receiver = try await HookReceiver.start()
    defer { receiver.stop() }
    try await body(receiver)
}

/// The claims of a JWT, unverified.
private func claims(_ token: String) throws -> [String: Any] {
    let part = String(token.split(separator: ".")[1])
    let data = try #require(Data(base64URL: part))
    return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
}

@Suite("Auth hooks: GoTrue's HTTP hooks, signed per Standard Webhooks, failing closed")
struct AuthHookTests {
    @Test("custom access token: the hook's claims are signed, on sign-in and on refresh, and the call verifies")
    func claimsAdded() async throws {
        try await withReceiver { receiver in
            try receiver.answer("/claims", ["claims": ["add": ["plan": "pro"]]])
            try await AccountHarness.with({ $0.auth.hooks.customAccessToken = receiver.endpoint("/claims") }) { h in
                let email = AccountHarness.newEmail()
                _ = try await h.confirmedAccount(email)
                let signIn = try await h.client.password(email, "correct horse battery")
                #expect(signIn.status == 200, "\(signIn.body)")
                let session = try SignedIn(signIn)
                #expect(try claims(session.access)["plan"] as? String == "pro")
                #expect(try await h.client.user(session.access).status == 200)
                let call = try #require(receiver.calls("/claims").last)
                #expect(call["verified"] as? Bool == true)
                let input = try receiver.lastInput("/claims")
                #expect(input["user_id"] as? String == session.userID)
                #expect(input["authentication_method"] as? String == "password")
                let metadata = try #require(input["metadata"] as? [String: Any])
                #expect(metadata["name"] as? String == "customize-access-token")
                #expect(metadata["uuid"] is String && metadata["time"] is String && metadata["ip_address"] is String)
                let sent = try #require(input["claims"] as? [String: Any])
                #expect(sent["sub"] as? String == session.userID && sent["session_id"] is String)

                let refreshed = try await h.client.refresh(session.refresh)
                #expect(refreshed.status == 200, "\(refreshed.body)")
                #expect(try claims(try SignedIn(refreshed).access)["plan"] as? String == "pro")
                #expect(try receiver.lastInput("/claims")["authentication_method"] as? String == "token_refresh")
            }
        }
    }

    @Test("custom access token: claims without a required one fail the sign-in")
    func requiredClaimDropped() async throws {
        try await withReceiver { receiver in
            try receiver.answer("/claims", ["claims": ["drop": ["session_id"]]])
            try await AccountHarness.with({ $0.auth.hooks.customAccessToken = receiver.endpoint("/claims") }) { h in
                let email = AccountHarness.newEmail()
                let signUp = try await h.client.signUp(email, password: "correct horse battery")
                #expect(signUp.status == 200)
                let code = try #require(try await h.mail(to: email, subject: "Confirm your email").code)
                let verified = try await h.client.verify(email, code: code, type: "signup")
                #expect(verified.status == 500)
                #expect(verified.json["error_code"] as? String == "hook_failed")
                #expect((verified.json["msg"] as? String ?? "").contains("session_id is required"))
            }
        }
    }

    @Test("before user created: a refusal stops the sign-up with the hook's status and message")
    func signUpRefused() async throws {
        try await withReceiver { receiver in
            try receiver.answer(
                "/before", ["json": ["error": ["http_code": 403, "message": "Sign-ups are closed this week"]]])
            try await AccountHarness.with({ $0.auth.hooks.beforeUserCreated = receiver.endpoint("/before") }) { h in
                let email = AccountHarness.newEmail()
                let refused = try await h.client.signUp(email, password: "correct horse battery")
                #expect(refused.status == 403)
                #expect(refused.json["error_code"] as? String == "hook_failed")
                #expect(refused.json["msg"] as? String == "Sign-ups are closed this week")
                let input = try receiver.lastInput("/before")
                #expect((input["user"] as? [String: Any])?["email"] as? String == email)
                #expect((input["metadata"] as? [String: Any])?["name"] as? String == "before-user-created")
                #expect(try await h.hasMail(to: email, subject: "Confirm your email") == false)

                // Allowed now (another address: the refused one spent its mail cooldown): the account the hook was
                // shown is the one made.
                try receiver.answer("/before", ["status": 204])
                let allowed = try await h.client.signUp(AccountHarness.newEmail(), password: "correct horse battery")
                #expect(allowed.status == 200)
                let shown = try #require((try receiver.lastInput("/before"))["user"] as? [String: Any])
                #expect(shown["id"] as? String == allowed.json["id"] as? String)
            }
        }
    }

    @Test("before user created: anonymous sign-ins and the admin API's new users ask it too; existing users do not")
    func otherPathsAsk() async throws {
        try await withReceiver { receiver in
            try receiver.answer("/before", ["json": ["error": ["http_code": 422, "message": "Not today"]]])
            try await AccountHarness.with({
                $0.auth.anonymousUsers = true
                $0.auth.hooks.beforeUserCreated = receiver.endpoint("/before")
            }) { h in
                let anonymous = try await h.client.post("/auth/v1/signup", ["data": ["nickname": "guest"]])
                #expect(anonymous.status == 422 && anonymous.json["msg"] as? String == "Not today")
                let shown = try #require((try receiver.lastInput("/before"))["user"] as? [String: Any])
                #expect(shown["is_anonymous"] as? Bool == true)

                let admin = AdminClient(client: h.client, key: try await AdminClient.mint(h).token)
                let email = AccountHarness.newEmail()
                let created = try await admin.send(.post, "/auth/v1/admin/users", ["email": email])
                #expect(created.status == 422 && created.json["msg"] as? String == "Not today")
                #expect((try receiver.lastInput("/before")["user"] as? [String: Any])?["email"] as? String == email)

                try receiver.answer("/before", ["status": 204])
                #expect(try await admin.send(.post, "/auth/v1/admin/users", ["email": email]).status == 200)
                let calls = receiver.calls("/before").count
                // The address has an account now: a sign-up for it makes none, and the hook is not asked.
                #expect(try await h.client.signUp(email, password: "correct horse battery").status == 200)
                #expect(receiver.calls("/before").count == calls)
            }
        }
    }

    @Test("send email: the hook gets the code and link token instead of the mail server")
    func mailHandedToHook() async throws {
        try await withReceiver { receiver in
            try receiver.answer("/mail", ["status": 204])
            try await AccountHarness.with({ $0.auth.hooks.sendEmail = receiver.endpoint("/mail") }) { h in
                let email = AccountHarness.newEmail()
                let signUp = try await h.client.signUp(email, password: "correct horse battery")
                #expect(signUp.status == 200)
                let input = try receiver.lastInput("/mail")
                #expect((input["metadata"] as? [String: Any])?["name"] as? String == "send-email")
                #expect((input["user"] as? [String: Any])?["email"] as? String == email)
                let data = try #require(input["email_data"] as? [String: Any])
                #expect(data["email_action_type"] as? String == "signup")
                #expect((data["token_hash"] as? String ?? "").isEmpty == false)
                #expect(data["site_url"] is String && data["redirect_to"] is String)
                let code = try #require(data["token"] as? String)
                let verified = try await h.client.verify(email, code: code, type: "signup")
                #expect(verified.status == 200)
                #expect(try await h.hasMail(to: email, subject: "Confirm your email") == false)
            }
        }
    }

    @Test("send email: a failing hook fails the request, and nothing is mailed")
    func mailHookFails() async throws {
        try await withReceiver { receiver in
            try receiver.answer("/mail", ["json": ["error": ["http_code": 503, "message": "Mail provider down"]]])
            try await AccountHarness.with({ $0.auth.hooks.sendEmail = receiver.endpoint("/mail") }) { h in
                let email = AccountHarness.newEmail()
                let signUp = try await h.client.signUp(email, password: "correct horse battery")
                #expect(signUp.status == 503)
                #expect(signUp.json["msg"] as? String == "Mail provider down")
                #expect(try await h.hasMail(to: email, subject: "Confirm your email") == false)
            }
        }
    }

    @Test("password verification attempt: a reject is 400 invalid_credentials and may end every session")
    func passwordAttemptRejected() async throws {
        try await withReceiver { receiver in
            try receiver.answer(
                "/password",
                ["json": ["decision": "reject", "message": "Locked by policy", "should_logout_user": true]])
            try await AccountHarness.with({
                $0.auth.hooks.passwordVerificationAttempt = receiver.endpoint("/password")
            }) { h in
                let email = AccountHarness.newEmail()
                let earlier = try await h.confirmedAccount(email)
                let refused = try await h.client.password(email, "correct horse battery")
                #expect(refused.status == 400)
                #expect(refused.json["error_code"] as? String == "invalid_credentials")
                #expect(refused.json["msg"] as? String == "Locked by policy")
                let input = try receiver.lastInput("/password")
                #expect(input["user_id"] as? String == earlier.userID && input["valid"] as? Bool == true)
                #expect((input["metadata"] as? [String: Any])?["name"] as? String == "password-verification")
                #expect(try await h.client.user(earlier.access).status == 403)

                try receiver.answer("/password", ["json": ["decision": "continue"]])
                #expect(try await h.client.password(email, "correct horse battery").status == 200)
                #expect(try await h.client.password(email, "wrong horse battery").status == 400)
                #expect(try receiver.lastInput("/password")["valid"] as? Bool == false)
            }
        }
    }

    @Test("MFA verification attempt: a reject is 403 mfa_verification_rejected and signs the user out")
    func mfaAttemptRejected() async throws {
        try await withReceiver { receiver in
            try receiver.answer("/mfa", ["json": ["decision": "reject", "message": "Too many devices"]])
            try await AccountHarness.with({ $0.auth.hooks.mfaVerificationAttempt = receiver.endpoint("/mfa") }) { h in
                let session = try await h.confirmedAccount(AccountHarness.newEmail())
                let factor = try await h.enrolled(session.access)
                let challenge = try #require(
                    try await h.challenge(factor.id, bearer: session.access).json["id"] as? String)
                let refused = try await h.verifyFactor(
                    factor.id, challenge: challenge, code: h.code(factor), bearer: session.access)
                #expect(refused.status == 403)
                #expect(refused.json["error_code"] as? String == "mfa_verification_rejected")
                #expect(refused.json["msg"] as? String == "Too many devices")
                let input = try receiver.lastInput("/mfa")
                #expect(input["factor_id"] as? String == factor.id && input["factor_type"] as? String == "totp")
                #expect(input["user_id"] as? String == session.userID && input["valid"] as? Bool == true)
                #expect((input["metadata"] as? [String: Any])?["name"] as? String == "mfa-verification")
                #expect(try await h.client.user(session.access).status == 403)
                #expect(try await h.client.refresh(session.refresh).status != 200)
            }
        }
    }

    @Test("a hook answering HTML, or more than 200 KB, fails the request with GoTrue's codes")
    func badAnswers() async throws {
        try await withReceiver { receiver in
            try await AccountHarness.with({ $0.auth.hooks.beforeUserCreated = receiver.endpoint("/before") }) { h in
                try receiver.answer("/before", ["content_type": "text/html", "text": "<html>ok</html>"])
                let html = try await h.client.signUp(AccountHarness.newEmail(), password: "correct horse battery")
                #expect(html.status == 400)
                #expect(html.json["error_code"] as? String == "hook_payload_invalid_content_type")

                try receiver.answer("/before", ["big": 300 * 1024])
                let big = try await h.client.signUp(AccountHarness.newEmail(), password: "correct horse battery")
                #expect(big.status == 422)
                #expect(big.json["error_code"] as? String == "hook_payload_over_size_limit")

                // A signature the receiver refuses (401) fails closed too.
                var wrong = receiver.endpoint("/before")
                wrong.secrets = [Array(repeating: 7, count: 32)]
                let hooks = AuthHooks(settings: Self.settings(beforeUserCreated: wrong), clock: h.clock)
                await #expect(throws: APIError.self) { try await hooks.call(.beforeUserCreated, input: [:]) }
            }
        }
    }

    @Test("a hook that does not answer in time is hook_timeout; one that is down is hook_timeout_after_retry")
    func unreachable() async throws {
        try await withReceiver { receiver in
            try receiver.answer("/hang", ["hang": true])
            let slow = AuthHooks(
                settings: Self.settings(beforeUserCreated: receiver.endpoint("/hang")), clock: TestClock(),
                timeout: .milliseconds(300), backoff: .zero)
            let timedOut = await #expect(throws: APIError.self) { try await slow.call(.beforeUserCreated, input: [:]) }
            #expect(timedOut?.code == "hook_timeout" && timedOut?.status == .unprocessableContent)

            var down = AuthHookEndpoint()
            down.uri = "http://127.0.0.1:\(try freeLoopbackPort())/hook"
            down.secrets = [receiver.key]
            let unreachable = AuthHooks(
                settings: Self.settings(beforeUserCreated: down), clock: TestClock(), backoff: .zero)
            let failed = await #expect(throws: APIError.self) {
                try await unreachable.call(.beforeUserCreated, input: [:])
            }
            #expect(failed?.code == "hook_timeout_after_retry" && failed?.status == .unprocessableContent)
        }
    }

    static func settings(beforeUserCreated: AuthHookEndpoint) -> AuthSettings {
        var settings = AuthSettings()
        settings.hooks.beforeUserCreated = beforeUserCreated
        return settings
    }
}

@Suite("Auth hook answers: decided without I/O")
struct AuthHookAnswerTests {
    @Test("204 and empty JSON allow; JSON objects are read; other content types and sizes are refused")
    func decide() throws {
        #expect(try AuthHookAnswer.decide(status: 204, contentType: nil, retryAfter: nil, body: []) == .answer([:]))
        #expect(
            try AuthHookAnswer.decide(status: 200, contentType: "application/json", retryAfter: nil, body: [])
                == .answer([:]))
        #expect(
            try AuthHookAnswer.decide(
                status: 200, contentType: "application/json; charset=utf-8", retryAfter: nil,
                body: Array(#"{"a": 1}"#.utf8)) == .answer(["a": .int(1)]))
        #expect(try AuthHookAnswer.decide(status: 503, contentType: nil, retryAfter: "1", body: []) == .retry)
        let cases: [(Int, String?, [UInt8], String, Int)] = [
            (200, nil, [], "hook_payload_invalid_content_type", 400),
            (200, "text/html", Array("<p>".utf8), "hook_payload_invalid_content_type", 400),
            (
                200, "application/json", Array(repeating: 0x20, count: AuthHookAnswer.sizeLimit + 1),
                "hook_payload_over_size_limit", 422
            ),
            (200, "application/json", Array("nope".utf8), "hook_failed", 500),
            (302, nil, [], "hook_failed", 500),
            (401, nil, [], "hook_failed", 500),
            (503, nil, [], "hook_failed", 500),
        ]
        for (status, type, body, code, answered) in cases {
            let error = #expect(throws: APIError.self) {
                try AuthHookAnswer.decide(status: status, contentType: type, retryAfter: nil, body: body)
            }
            #expect(error?.code == code && error?.status.code == answered, "\(status) \(type ?? "")")
        }
    }

    @Test("a hook's error object fails with its status (4xx/5xx only) and message; without a message it is no error")
    func hookError() throws {
        let refused = #expect(throws: APIError.self) {
            try AuthHookAnswer.checkError(["error": .object(["http_code": .int(429), "message": .string("Slow down")])])
        }
        #expect(refused?.status.code == 429 && refused?.message == "Slow down" && refused?.code == "hook_failed")
        let odd = #expect(throws: APIError.self) {
            try AuthHookAnswer.checkError(["error": .object(["http_code": .int(200), "message": .string("x")])])
        }
        #expect(odd?.status.code == 500)
        try AuthHookAnswer.checkError(["error": .object(["http_code": .int(400)])])
    }

    @Test("required claims must stay, and known claims keep their types")
    func requiredClaims() throws {
        var claims: JSONFields = [
            "aud": .string("authenticated"), "exp": .int(2), "iat": .int(1), "sub": .string("u"),
            "email": .string("a@example.com"), "phone": .string(""), "role": .string("authenticated"),
            "aal": .string("aal1"), "session_id": .string("s"), "is_anonymous": .bool(false), "plan": .string("pro"),
        ]
        #expect(try AuthHookAnswer.claims(["claims": .object(claims)]) == claims)
        claims["role"] = nil
        claims["exp"] = .string("later")
        #expect(AuthHookAnswer.claimProblems(claims) == ["exp: Invalid type. Expected: integer", "role is required"])
        #expect(throws: APIError.self) { try AuthHookAnswer.claims([:]) }
    }

    @Test("decisions, and the email data of each mail the send email hook takes over")
    func decisionsAndEmailData() throws {
        let reject = AuthHookAnswer.Decision(
            ["decision": .string("reject"), "message": .string("No"), "should_logout_user": .bool(true)])
        #expect(
            reject
                == AuthHookAnswer.Decision([
                    "decision": .string("reject"), "message": .string("No"), "should_logout_user": .bool(true),
                ]))
        #expect(reject.reject && reject.logOut && reject.message == "No")
        #expect(!AuthHookAnswer.Decision([:]).reject)
        let link = "https://auth.example.com/auth/v1/verify?token=abc&type=recovery&redirect_to=https%3A%2F%2Fapp"
        let recovery = try #require(HookEmailData(.recovery(code: "123456", link: link), siteURL: "https://site"))
        #expect(recovery.actionType == "recovery" && recovery.token == "123456" && recovery.tokenHash == "abc")
        #expect(recovery.redirectTo == "https://app" && recovery.siteURL == "https://site")
        let change = try #require(
            HookEmailData(.emailChange(code: "654321", link: link, newEmail: "n@example.com"), siteURL: ""))
        #expect(change.actionType == "email_change" && change.tokenNew == "654321" && change.tokenHashNew == "abc")
        #expect(HookEmailData(.accountDeleted, siteURL: "") == nil)
    }
}
