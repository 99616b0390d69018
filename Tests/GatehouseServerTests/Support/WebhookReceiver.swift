import Foundation
import NIOConcurrencyHelpers

/// An integrator's webhook endpoint for the outbound webhook tests: `Tests/webhooks/receiver.py` on a loopback port.
/// It checks every delivery's signature with the PyPI `standardwebhooks` package against the secrets the test gave
/// its path, answers as the test says (a behaviour per path, changeable at any time), and logs what it received.
final class WebhookReceiver {
    private let peer: PythonPeer
    private let folder: TemporaryFolder
    /// Behaviour and secrets by path, as last written to the configuration file.
    private let routes = NIOLockedValueBox([String: [String: Any]]())

    private var configPath: String { folder.path + "/receiver.json" }
    private var logPath: String { folder.path + "/deliveries.jsonl" }

    var port: Int { peer.port }

    private init(peer: PythonPeer, folder: TemporaryFolder) {
        self.peer = peer
        self.folder = folder
    }

    /// How a path answers a delivery (see Tests/webhooks/receiver.py).
    enum Behaviour {
        /// 204.
        case ok
        /// This status, with a short body.
        case status(Int)
        /// 302 to this URL.
        case redirect(String)
        /// 200 after this many seconds.
        case slow(Double)
        /// 200 with a 10 MiB body, its length declared (or, `chunked`, sent without one).
        case huge(chunked: Bool)
        /// No answer until the client gives up.
        case hang

        var configValue: String {
            switch self {
            case .ok: "ok"
            case .status(let code): "status:\(code)"
            case .redirect(let url): "redirect:\(url)"
            case .slow(let seconds): "slow:\(seconds)"
            case .huge(let chunked): chunked ? "huge:chunked" : "huge"
            case .hang: "hang"
            }
        }
    }

    /// One request the receiver got, as it logged it.
    struct Delivery {
        let path: String
        let webhookID: String?
        let webhookTimestamp: String?
        /// How many signatures the `webhook-signature` header carried.
        let signatures: Int
        /// Whether one of the path's secrets verified it with `standardwebhooks`.
        let verified: Bool
        /// The indexes (in the order `configure` was given them) of the secrets that verified it.
        let verifiedBy: [Int]
        /// Why verification failed, when it did.
        let error: String?
        let contentType: String?
        /// The payload's `type`.
        let type: String?
        /// The whole payload, parsed.
        let body: [String: Any]
        /// The payload's `data`.
        var data: [String: Any] { body["data"] as? [String: Any] ?? [:] }
        /// The status it answered, or "hang".
        let answer: String
        let receivedAt: Double
    }

    /// Starts the receiver with no paths configured (every request is answered 401 unverified until one is).
    static func start() async throws -> WebhookReceiver {
        let folder = try TemporaryFolder()
        try Data(#"{"paths": {}}"#.utf8).write(to: URL(fileURLWithPath: folder.path + "/receiver.json"))
        let peer = try await PythonPeer.start(
            PythonPeer.script("webhooks/receiver.py"),
            arguments: [folder.path + "/receiver.json", folder.path + "/deliveries.jsonl"],
            failure: "the webhook receiver did not start (is standardwebhooks installed? scripts/requirements-test.txt)"
        )
        return WebhookReceiver(peer: peer, folder: folder)
    }

    /// The URL of `path` on this receiver.
    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Sets how `path` answers and the `whsec_` secrets that may sign its deliveries.
    func configure(path: String, behaviour: Behaviour, secret: String) throws {
        try configure(path: path, behaviour: behaviour, secrets: [secret])
    }

    /// The same with several secrets (a rotation signs with two).
    func configure(path: String, behaviour: Behaviour, secrets: [String]) throws {
        let data = try routes.withLockedValue { routes in
            routes[path] = ["behaviour": behaviour.configValue, "secrets": secrets]
            return try JSONSerialization.data(withJSONObject: ["paths": routes])
        }
        try data.write(to: URL(fileURLWithPath: configPath), options: .atomic)
    }

    /// Every request received so far (on `path`, when given), oldest first.
    func received(path: String? = nil) -> [Delivery] {
        logLines().compactMap { line -> Delivery? in
            guard line["event"] as? String == "request" else { return nil }
            let delivery = Delivery(
                path: line["path"] as? String ?? "", webhookID: line["webhook_id"] as? String,
                webhookTimestamp: line["webhook_timestamp"] as? String,
                signatures: (line["signatures"] as? NSNumber)?.intValue ?? 0,
                verified: line["verified"] as? Bool ?? false,
                verifiedBy: (line["verified_by"] as? [NSNumber])?.map(\.intValue) ?? [],
                error: line["error"] as? String, contentType: line["content_type"] as? String,
                type: line["type"] as? String, body: line["body"] as? [String: Any] ?? [:],
                answer: (line["answer"] as? NSNumber)?.stringValue ?? line["answer"] as? String ?? "",
                receivedAt: (line["received_at"] as? NSNumber)?.doubleValue ?? 0)
            return path == nil || delivery.path == path ? delivery : nil
        }
    }

    /// The webhook ids of the requests to a `hang` path whose client has given up and closed the connection.
    func closedHangs(path: String) -> [String] {
        logLines().compactMap { line in
            line["event"] as? String == "closed" && line["path"] as? String == path
                ? line["webhook_id"] as? String ?? "" : nil
        }
    }

    /// Polls the log until at least `count` requests arrived (on `path`, when given), or `deadline` passes; returns
    /// what arrived by then either way, for the caller's expectations to say what is missing.
    @discardableResult
    func waitFor(count: Int, path: String? = nil, deadline: Duration = .seconds(60)) async throws -> [Delivery] {
        let enough = try await firstValue(within: deadline) { () -> [Delivery]? in
            let deliveries = received(path: path)
            return deliveries.count >= count ? deliveries : nil
        }
        return enough ?? received(path: path)
    }

    /// Polls the log until `condition` holds for what arrived, or `deadline` passes; returns whether it held.
    func waitUntil(deadline: Duration = .seconds(60), _ condition: ([Delivery]) -> Bool) async throws -> Bool {
        try await firstValue(within: deadline) { condition(received()) ? true : nil } ?? false
    }

    /// The log's lines, parsed; a line still being written (the last, without its newline) is left for the next read.
    private func logLines() -> [[String: Any]] {
        guard let data = FileManager.default.contents(atPath: logPath) else { return [] }
        return data.split(separator: UInt8(ascii: "\n")).compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0))) as? [String: Any]
        }
    }

    func stop() {
        peer.stop()
        folder.remove()
    }
}
