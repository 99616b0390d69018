import AsyncHTTPClient
import Foundation
import GatehouseAPI
import NIOCore
import NIOHTTP1

/// GoTrue's HTTP auth hooks (`--hook-<name>-uri`): a signed POST of a JSON input to the operator's endpoint, whose
/// JSON answer shapes or refuses what the request was doing. Built once from the settings and handed to the services
/// that call hooks; a hook is on when its URI is set, and costs nothing when it is off.
///
/// Every call fails closed, as GoTrue's do: 5 seconds for all its tries together (`hook_timeout` when they run out);
/// up to three tries on network errors, 2 seconds apart (`hook_timeout_after_retry` after the last); an answer over
/// 200 KB is `hook_payload_over_size_limit`, one that is not JSON `hook_payload_invalid_content_type`, and the hook's
/// own `{"error": {"http_code", "message"}}` fails the request with that status and message (`hook_failed`).
final class AuthHooks: Sendable {
    /// A hook, with the name its input's `metadata.name` carries (GoTrue's hook names).
    enum Hook: String, Sendable, CaseIterable {
        case customAccessToken = "customize-access-token"
        case beforeUserCreated = "before-user-created"
        case sendEmail = "send-email"
        case passwordVerificationAttempt = "password-verification"
        case mfaVerificationAttempt = "mfa-verification"
    }

    let hooks: AuthHookSettings
    let settings: AuthSettings
    let clock: any GatehouseClock
    /// All tries of one call together, as GoTrue's single deadline.
    let timeout: TimeAmount
    /// The wait before another try after a network error.
    let backoff: Duration
    let tries = 3

    /// The hooks `settings.hooks` turns on. Tests shorten `timeout` and `backoff` to fail fast.
    init(
        settings: AuthSettings, clock: any GatehouseClock, timeout: TimeAmount = .seconds(5),
        backoff: Duration = .seconds(2)
    ) {
        self.hooks = settings.hooks
        self.settings = settings
        self.clock = clock
        self.timeout = timeout
        self.backoff = backoff
    }

    /// The endpoint of `hook`, when it is on.
    func endpoint(_ hook: Hook) -> AuthHookEndpoint? {
        let endpoint: AuthHookEndpoint
        switch hook {
        case .customAccessToken: endpoint = hooks.customAccessToken
        case .beforeUserCreated: endpoint = hooks.beforeUserCreated
        case .sendEmail: endpoint = hooks.sendEmail
        case .passwordVerificationAttempt: endpoint = hooks.passwordVerificationAttempt
        case .mfaVerificationAttempt: endpoint = hooks.mfaVerificationAttempt
        }
        return endpoint.uri == nil ? nil : endpoint
    }

    /// Whether `hook` is on.
    func isOn(_ hook: Hook) -> Bool { endpoint(hook) != nil }

    /// The HTTP client every hook call goes through: redirects are not followed (an answer of 3xx fails the call) and
    /// a refused connection fails the try at once rather than waiting for the pool's own retries. It lives as long
    /// as the process, as `HTTPClient.shared` does.
    static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow)
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(5))
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// Calls `hook` with `input` (its `metadata` is added here) and gives back its answer's JSON object. Throws the
    /// `APIError` the request fails with.
    func call(_ hook: Hook, input: JSONFields) async throws -> JSONFields {
        guard let endpoint = endpoint(hook), let uri = endpoint.uri else { return [:] }
        var payload = input
        payload["metadata"] = .object(metadata(hook))
        let body = Array(try JSONEncoder().encode(payload))
        let deadline = NIODeadline.now() + timeout
        let id = "msg_" + Secrets.identifier()
        for attempt in 0..<tries {
            var request = HTTPClientRequest(url: uri)
            request.method = .POST
            request.headers.add(name: "content-type", value: "application/json")
            request.headers.add(name: "accept-encoding", value: "identity")
            // Transport time, not the injected clock: receivers compare it with their own within minutes.
            let timestamp = Int64(Date().timeIntervalSince1970)
            for (name, value) in StandardWebhooks.headers(
                id: id, timestamp: timestamp, body: body, keys: endpoint.secrets)
            {
                request.headers.add(name: name, value: value)
            }
            request.body = .bytes(ByteBuffer(bytes: body))
            let verdict: AuthHookAnswer.Verdict
            do {
                let response = try await Self.client.execute(request, deadline: deadline)
                let answer = try await Self.read(response.body, deadline: deadline)
                verdict = try AuthHookAnswer.decide(
                    status: Int(response.status.code), contentType: response.headers.first(name: "content-type"),
                    retryAfter: response.headers.first(name: "retry-after"), body: answer)
            } catch let error as APIError {
                throw error
            } catch {
                if Self.isTimeout(error) || NIODeadline.now() >= deadline { throw timedOut() }
                guard attempt < tries - 1 else {
                    throw APIError(
                        .unprocessableContent, code: .hookTimeoutAfterRetry,
                        message: "Failed to reach hook after maximum retries")
                }
                try await pause(until: deadline)
                continue
            }
            switch verdict {
            case .answer(let object): return object
            case .retry: continue
            }
        }
        throw AuthHookAnswer.failed("Service currently unavailable due to hook")
    }

    /// GoTrue's `metadata`: a fresh id, the time, the hook's name, and the caller's address when there is a request.
    func metadata(_ hook: Hook) -> JSONFields {
        var metadata: JSONFields = [
            "uuid": .string(UUID().uuidString.lowercased()),
            "time": .string(MillisecondDateTranscoder.format(clock.now)),
            "name": .string(hook.rawValue),
        ]
        if let scope = RequestScope.current,
            let ip = ClientInfo(headers: scope.head.headerFields, peerAddress: scope.peerAddress, settings: settings).ip
        {
            metadata["ip_address"] = .string(ip)
        }
        return metadata
    }

    /// The answer's body, up to one byte past the limit (enough to tell it was too large).
    private static func read(_ body: HTTPClientResponse.Body, deadline: NIODeadline) async throws -> [UInt8] {
        var bytes: [UInt8] = []
        for try await chunk in body {
            bytes += chunk.readableBytesView.prefix(AuthHookAnswer.sizeLimit + 1 - bytes.count)
            if bytes.count > AuthHookAnswer.sizeLimit { break }
        }
        return bytes
    }

    /// Waits `backoff` before another try, or fails with `hook_timeout` when the deadline comes first.
    private func pause(until deadline: NIODeadline) async throws {
        let remaining = deadline - NIODeadline.now()
        guard Duration.nanoseconds(remaining.nanoseconds) > backoff else { throw timedOut() }
        try await Task.sleep(for: backoff)
    }

    private func timedOut() -> APIError {
        let seconds = Double(timeout.nanoseconds) / 1_000_000_000
        return APIError(
            .unprocessableContent, code: .hookTimeout,
            message: "Failed to reach hook within maximum time of \(seconds) seconds")
    }

    /// Whether `error` is the deadline running out (GoTrue's `context.DeadlineExceeded`) rather than the network.
    static func isTimeout(_ error: any Error) -> Bool {
        guard let error = error as? HTTPClientError else { return false }
        return error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout
    }
}
