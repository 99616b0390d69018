import Foundation

/// A signed-in session: the tokens and who they belong to.
public struct AuthSession: Codable, Sendable, Equatable {
    /// The short-lived bearer token.
    public let accessToken: String
    /// The single-use token that gets the next pair.
    public let refreshToken: String
    /// When `accessToken` stops being accepted.
    public let expiresAt: Date
    /// The account.
    public let userID: String
    /// The account's email address, when it has one.
    public let email: String?
    /// The company this session is logged in to; nil for the account session.
    public let companyID: String?
    /// When the session itself ends, however often it refreshes (nil when the server did not say).
    public let endsAt: Date?

    /// A session as the server issued it.
    public init(
        accessToken: String, refreshToken: String, expiresAt: Date, userID: String, email: String?,
        companyID: String? = nil, endsAt: Date? = nil
    ) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresAt = expiresAt
        self.userID = userID
        self.email = email
        self.companyID = companyID
        self.endsAt = endsAt
    }

    /// Whether the access token ends within `margin` seconds of `now`.
    public func expires(within margin: TimeInterval, of now: Date = Date()) -> Bool {
        expiresAt.timeIntervalSince(now) <= margin
    }
}

/// Where the session is kept between launches. Errors are the app's to see: the SDK never swallows them.
public protocol SessionStore: Sendable {
    /// The stored session, or nil when there is none.
    func load() throws -> AuthSession?
    /// Stores `session`, replacing any other.
    func save(_ session: AuthSession) throws
    /// Forgets the session.
    func remove() throws
    /// A second store beside this one, for the session named `name` (the company session is `"company"`). Asked
    /// for the same name twice, it answers a store over the same place.
    func companion(named name: String) -> any SessionStore
}

/// A session kept in a file readable by its owner only (0600): the store for Linux.
public struct FileSessionStore: SessionStore {
    /// The file.
    public let url: URL

    /// A store at `url`; its folder is made when missing.
    public init(url: URL) { self.url = url }

    /// A file beside this one: `session.json` has the companion `session-company.json`.
    public func companion(named name: String) -> any SessionStore {
        let base = url.deletingPathExtension().lastPathComponent
        let ext = url.pathExtension.isEmpty ? "" : ".\(url.pathExtension)"
        return FileSessionStore(url: url.deletingLastPathComponent().appendingPathComponent("\(base)-\(name)\(ext)"))
    }

    /// The session in the file, or nil when there is no file.
    public func load() throws -> AuthSession? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        do {
            return try JSONDecoder().decode(AuthSession.self, from: try Data(contentsOf: url))
        } catch {
            throw GatehouseError.sessionStore("cannot read \(url.lastPathComponent): \(error.localizedDescription)")
        }
    }

    /// Writes the session to a new 0600 file in a 0700 folder and moves it into place.
    public func save(_ session: AuthSession) throws {
        do {
            let folder = url.deletingLastPathComponent()
            try FileManager.default.createDirectory(
                at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let data = try JSONEncoder().encode(session)
            let temporary = folder.appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString)")
            guard
                FileManager.default.createFile(
                    atPath: temporary.path, contents: data, attributes: [.posixPermissions: 0o600])
            else { throw CocoaError(.fileWriteNoPermission) }
            // rename(2) replaces the file in one step; FileManager.replaceItemAt fails on Linux ("The file
            // doesn't exist") when the file is there.
            guard rename(temporary.path, url.path) == 0 else {
                let reason = String(cString: strerror(errno))
                try? FileManager.default.removeItem(at: temporary)
                throw GatehouseError.sessionStore("cannot write \(url.lastPathComponent): \(reason)")
            }
        } catch let error as GatehouseError {
            throw error
        } catch {
            throw GatehouseError.sessionStore("cannot write \(url.lastPathComponent): \(error.localizedDescription)")
        }
    }

    /// Deletes the file.
    public func remove() throws {
        do {
            if FileManager.default.fileExists(atPath: url.path) { try FileManager.default.removeItem(at: url) }
        } catch {
            throw GatehouseError.sessionStore("cannot remove \(url.lastPathComponent): \(error.localizedDescription)")
        }
    }
}
