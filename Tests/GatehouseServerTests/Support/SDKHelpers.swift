import Foundation
import GatehouseClientTesting
import GatehouseServer
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import OpenAPIRuntime
import Testing

@testable import GatehouseClient

/// The network of one device, as the tests switch it: off (every request fails before it leaves), or dropping the
/// answer to the next push after the server has applied it (the app killed mid-push).
final class DeviceNetwork: ClientMiddleware, Sendable {
    struct Unreachable: Error {}
    private let state = NIOLockedValueBox((offline: false, dropPushAnswers: 0))

    var offline: Bool {
        get { state.withLockedValue { $0.offline } }
        set { state.withLockedValue { $0.offline = newValue } }
    }

    /// Drops the answers of the next `count` pushes.
    func dropPushAnswers(_ count: Int) { state.withLockedValue { $0.dropPushAnswers = count } }

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        if offline { throw Unreachable() }
        let answer = try await next(request, body, baseURL)
        let drop = state.withLockedValue { state in
            guard operationID == "syncPush", state.dropPushAnswers > 0 else { return false }
            state.dropPushAnswers -= 1
            return true
        }
        if drop { throw Unreachable() }
        return answer
    }
}

/// The SDK's requests handed to the server's router in this process (`RouterServer`), in place of URLSession: the
/// generated client, its middlewares and the SDK's session handling all run; only the socket is left out. Answers
/// arrive as the router writes them, so the live event stream streams through it too.
struct RouterClientTransport: ClientTransport {
    let server: RouterServer

    func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws
        -> (HTTPResponse, HTTPBody?)
    {
        var head = request
        head.scheme = "http"
        head.authority = baseURL.host.map { host in baseURL.port.map { "\(host):\($0)" } ?? host }
        var prefix = baseURL.path
        if prefix.hasSuffix("/") { prefix.removeLast() }
        head.path = prefix + (request.path ?? "/")
        var bytes = ByteBuffer()
        if let body {
            bytes = ByteBuffer(bytes: try await Data(collecting: body, upTo: 16 << 20))
            head.headerFields[.contentLength] = String(bytes.readableBytes)
        }
        let (response, parts) = await server.respond(to: head, body: bytes)
        return (
            response,
            HTTPBody(
                parts.map { ArraySlice($0.readableBytesView) }, length: .unknown, iterationBehavior: .single)
        )
    }
}

/// One app on one device: its client, the network it talks through, and the folder its company stores live in.
struct AppDevice {
    let client: GatehouseClient
    let network: DeviceNetwork
    let sessions: any SessionStore
    let folder: URL
    /// What its requests go through: the server's router in process, or URLSession when nil.
    let transport: RouterClientTransport?

    /// A device of the harness's server, through its router (or over URLSession when the server is live).
    init(_ h: AccountHarness, sessions: any SessionStore = MemorySessionStore(), folder: URL? = nil) throws {
        try self.init(h.server.baseURL, transport: h.sdkTransport, sessions: sessions, folder: folder)
    }

    init(
        _ base: String, transport: RouterClientTransport? = nil, sessions: any SessionStore = MemorySessionStore(),
        folder: URL? = nil
    ) throws {
        network = DeviceNetwork()
        self.sessions = sessions
        self.transport = transport
        self.folder =
            folder
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-app-\(UUID().uuidString)")
        client = GatehouseClient(
            url: try #require(URL(string: base)), sessionStore: sessions, refreshMargin: 60, middlewares: [network],
            retryBase: .milliseconds(50), retryMax: .milliseconds(400), transport: transport)
    }

    /// The same device launched again: a new client over the same session store and folder.
    func relaunched() throws -> AppDevice {
        try AppDevice(client.url.absoluteString, transport: transport, sessions: sessions, folder: folder)
    }

    /// Signs up by mailed code, as the seeds do.
    @discardableResult
    func signUp(_ h: AccountHarness, _ name: String) async throws -> String {
        let email = AccountHarness.newEmail(name)
        try await client.auth.signUp(email: email, password: "correct horse battery", profile: ["first_name": name])
        let code = try #require(try await h.mail(to: email, subject: "Confirm your email").code)
        try await client.auth.verify(email: email, code: code, type: .signup)
        return email
    }

    func store(_ cid: String) async throws -> CompanyStore {
        let store = try await client.openCompanyStore(companyID: cid, directory: folder)
        await store.startSyncing()
        return store
    }

    var userID: String {
        get async throws { try #require(await client.auth.currentSession?.userID) }
    }

    /// The company session's bearer, for checking the server's side directly.
    var companyBearer: String {
        get async throws { try #require(await client.auth.companySessions.current?.accessToken) }
    }
}

/// Everything a stream sent, collected as it arrives.
final class Recorder<Event: Sendable>: Sendable {
    private let seen = NIOLockedValueBox<[Event]>([])
    private let reader: Task<Void, Never>

    init(_ stream: AsyncStream<Event>) {
        let seen = self.seen
        reader = Task { for await event in stream { seen.withLockedValue { $0.append(event) } } }
    }

    deinit { reader.cancel() }

    var events: [Event] { seen.withLockedValue { $0 } }

    /// Polls until an event matches (60 s deadline).
    func waitFor(_ matches: @escaping @Sendable (Event) -> Bool) async throws -> Bool {
        try await LiveServer.eventually { self.events.contains(where: matches) }
    }
}

/// An owner and a guest in one Business company, both logged in to it through the SDK.
func sharedCompany(_ h: AccountHarness) async throws -> (owner: AppDevice, guest: AppDevice, cid: String) {
    let owner = try AppDevice(h)
    try await owner.signUp(h, "owner")
    let company = try await owner.client.companies.create(name: "Acme Ltd")
    #expect(try await Operator(store: h.server.services.store).setTier(company.id, .business))
    _ = try await owner.client.companies.createCredential(
        in: company.id, username: "olive", password: "blue tractor 42")
    try await owner.client.companies.signIn(to: company.id, username: "olive", password: "blue tractor 42")
    let link = try #require(try await owner.client.companies.createShare(permission: .readWrite).url)
    let guest = try AppDevice(h)
    try await guest.signUp(h, "guest")
    _ = try await guest.client.companies.acceptShare(link)
    _ = try await guest.client.companies.createCredential(in: company.id, username: "gus", password: "green tractor 17")
    try await guest.client.companies.signIn(to: company.id, username: "gus", password: "green tractor 17")
    return (owner, guest, company.id)
}

/// The SDK's assurance level, named apart from the server's internal type of the same name for test files that see
/// both modules' internals.
typealias ClientAssurance = AssuranceLevel
