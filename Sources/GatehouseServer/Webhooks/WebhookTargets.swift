import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Why a webhook's target is refused before anything is sent to it.
struct WebhookTargetRefusal: Error, Equatable, CustomStringConvertible {
    let description: String
}

/// The HTTP clients webhook deliveries go out through, one per host: redirects are never followed, connecting takes
/// at most 5 s and a whole delivery 15 s. Unless private targets are allowed, a host's name is resolved here, every
/// address it has is checked against loopback, link-local and private ranges, and the client connects only to the
/// address that was checked (`dnsOverride`), so a name that resolves differently a moment later (DNS rebinding) still
/// reaches the checked address. A host's client is made again after `reresolveAfter`.
final class WebhookTargets: Sendable {
    let allowPrivate: Bool
    private let clients = NIOLockedValueBox<[String: Pinned]>([:])
    /// The client for targets that need no pinning, made on first use (the command line never sends).
    private let openClient = NIOLockedValueBox<HTTPClient?>(nil)

    static let connectTimeout: TimeAmount = .seconds(5)
    static let requestTimeout: TimeAmount = .seconds(15)
    static let reresolveAfter: TimeInterval = 300

    private struct Pinned: Sendable {
        let client: HTTPClient
        let madeAt: Date
    }

    init(allowPrivate: Bool) {
        self.allowPrivate = allowPrivate
    }

    private var open: HTTPClient {
        openClient.withLockedValue { client in
            if let client { return client }
            let made = HTTPClient(eventLoopGroupProvider: .singleton, configuration: Self.configuration(pinning: [:]))
            client = made
            return made
        }
    }

    static func configuration(pinning: [String: String]) -> HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: connectTimeout, read: requestTimeout))
        configuration.dnsOverride = pinning
        // As many connections to one host as deliveries may be in flight: endpoints on one host (paths of one
        // receiver) must not queue behind another's hanging tries in the pool.
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: WebhookDispatcher.inFlightLimit)
        return configuration
    }

    /// Whether `url` may be registered: an absolute http(s) URL whose host, when it is an address, is not private
    /// (unless allowed). A name is checked again at every delivery, once resolved.
    func check(url text: String) throws(WebhookTargetRefusal) -> URL {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
            let host = url.host, !host.isEmpty, url.user == nil, url.password == nil, text.count <= 2048
        else {
            throw WebhookTargetRefusal(
                description: "The URL must be an absolute http:// or https:// URL without a user")
        }
        if !allowPrivate {
            if host.lowercased() == "localhost" || host.lowercased().hasSuffix(".localhost") {
                throw WebhookTargetRefusal(description: "The URL names this machine (loopback)")
            }
            if let address = TargetAddress(host), address.range != .global {
                throw Self.refusal(address)
            }
        }
        return url
    }

    /// The client to send to `url` with, its address checked.
    func client(for url: URL) async throws -> HTTPClient {
        guard !allowPrivate, let host = url.host else { return open }
        if TargetAddress(host) != nil { return open }  // an address, checked by `check`
        let now = Date()
        if let pinned = clients.withLockedValue({ $0[host] }),
            now.timeIntervalSince(pinned.madeAt) < Self.reresolveAfter
        {
            return pinned.client
        }
        let addresses = try await Self.resolve(host)
        guard let first = addresses.first else {
            throw WebhookTargetRefusal(description: "The host \(host) has no address")
        }
        if let refused = addresses.first(where: { $0.range != .global }) { throw Self.refusal(refused) }
        let client = HTTPClient(
            eventLoopGroupProvider: .singleton, configuration: Self.configuration(pinning: [host: first.description]))
        let replaced = clients.withLockedValue { clients in
            defer { clients[host] = Pinned(client: client, madeAt: now) }
            return clients[host]
        }
        if let replaced { Task { try? await replaced.client.shutdown() } }
        return client
    }

    /// Closes every client.
    func shutdown() async {
        let all = clients.withLockedValue { clients in
            defer { clients = [:] }
            return Array(clients.values)
        }
        for pinned in all { try? await pinned.client.shutdown() }
        let open = openClient.withLockedValue { client in
            defer { client = nil }
            return client
        }
        try? await open?.shutdown()
    }

    private static func refusal(_ address: TargetAddress) -> WebhookTargetRefusal {
        let range =
            switch address.range {
            case .loopback: "loopback"
            case .linkLocal: "link-local"
            default: "private or reserved"
            }
        return WebhookTargetRefusal(
            description: "The target \(address) is a \(range) address (--webhooks-allow-private-targets is off)")
    }

    /// The threads `getaddrinfo` blocks on: its own, so that a resolver that does not answer holds up neither the
    /// event loops nor the shared pool the store's SQLite connections use. As long-lived as the process.
    private static let resolverThreads: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 2)
        pool.start()
        return pool
    }()

    /// Every address `host` resolves to, through the system's resolver, off the event loops.
    static func resolve(_ host: String) async throws -> [TargetAddress] {
        try await resolverThreads.runIfActive {
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var result: UnsafeMutablePointer<addrinfo>?
            guard getaddrinfo(host, nil, &hints, &result) == 0, let result else {
                throw WebhookTargetRefusal(description: "The host \(host) could not be resolved")
            }
            defer { freeaddrinfo(result) }
            var addresses: [TargetAddress] = []
            var next: UnsafeMutablePointer<addrinfo>? = result
            while let info = next {
                if let address = info.pointee.ai_addr {
                    switch Int32(address.pointee.sa_family) {
                    case AF_INET:
                        let v4 = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
                        addresses.append(TargetAddress(socketAddress: SocketAddress(v4, host: host)))
                    case AF_INET6:
                        let v6 = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee }
                        addresses.append(TargetAddress(socketAddress: SocketAddress(v6, host: host)))
                    default: break
                    }
                }
                next = info.pointee.ai_next
            }
            return addresses
        }
    }
}
