import AsyncHTTPClient
import Foundation
import GatehouseServer
import NIOHTTP1
import Testing

/// One small helper per endpoint, so tests read like the flows they check.
struct AuthClient {
    let http: any Transport
    let base: String
    var headers: [(String, String)] = [("User-Agent", "GatehouseTests/1.0")]

    func post(_ path: String, _ body: [String: Any], bearer: String? = nil, extra: [(String, String)] = []) async throws
        -> HTTPReply
    {
        let data = try JSONSerialization.data(withJSONObject: body)
        return try await http.send(
            .POST, base + path, body: String(decoding: data, as: UTF8.self), headers: headers + auth(bearer) + extra)
    }

    func get(_ path: String, bearer: String? = nil, extra: [(String, String)] = []) async throws -> HTTPReply {
        try await http.send(.GET, base + path, headers: headers + auth(bearer) + extra)
    }

    func put(_ path: String, _ body: [String: Any], bearer: String?) async throws -> HTTPReply {
        let data = try JSONSerialization.data(withJSONObject: body)
        return try await http.send(
            .PUT, base + path, body: String(decoding: data, as: UTF8.self), headers: headers + auth(bearer))
    }

    func delete(_ path: String, bearer: String?) async throws -> HTTPReply {
        try await http.send(.DELETE, base + path, headers: headers + auth(bearer))
    }

    private func auth(_ bearer: String?) -> [(String, String)] {
        bearer.map { [("Authorization", "Bearer \($0)")] } ?? []
    }

    // MARK: Endpoints

    func signUp(_ email: String, password: String? = nil, data: [String: Any]? = nil) async throws -> HTTPReply {
        var body: [String: Any] = ["email": email]
        if let password { body["password"] = password }
        if let data { body["data"] = data }
        return try await post("/auth/v1/signup", body)
    }

    func otp(_ email: String, createUser: Bool = true) async throws -> HTTPReply {
        try await post("/auth/v1/otp", ["email": email, "create_user": createUser])
    }

    func verify(_ email: String, code: String, type: String) async throws -> HTTPReply {
        try await post("/auth/v1/verify", ["email": email, "token": code, "type": type])
    }

    func password(_ email: String, _ password: String) async throws -> HTTPReply {
        try await post("/auth/v1/token?grant_type=password", ["email": email, "password": password])
    }

    func refresh(_ token: String) async throws -> HTTPReply {
        try await post("/auth/v1/token?grant_type=refresh_token", ["refresh_token": token])
    }

    func user(_ access: String) async throws -> HTTPReply { try await get("/auth/v1/user", bearer: access) }

    func logout(_ access: String, scope: String) async throws -> HTTPReply {
        try await post("/auth/v1/logout?scope=\(scope)", [:], bearer: access)
    }
}

/// A signed-in session as the client keeps it.
struct SignedIn {
    let access: String
    let refresh: String
    let userID: String

    init(_ reply: HTTPReply) throws {
        let json = reply.json
        access = try #require(json["access_token"] as? String)
        refresh = try #require(json["refresh_token"] as? String)
        userID = try #require((json["user"] as? [String: Any])?["id"] as? String)
    }
}

/// A mail as the recipient reads it.
struct ReceivedMail {
    let raw: String

    /// The decoded text of the message (quoted-printable undone).
    var text: String { Self.decodeQuotedPrintable(raw) }

    /// The subject, unfolded, with RFC 2047 encoded-words (as `MailMessage` writes them) decoded.
    var subject: String {
        let lines = raw.components(separatedBy: "\r\n")
        guard var index = lines.firstIndex(where: { $0.hasPrefix("Subject: ") }) else { return "" }
        var folded = [String(lines[index].dropFirst(9))]
        while index + 1 < lines.count, lines[index + 1].hasPrefix(" ") {
            index += 1
            folded.append(String(lines[index].dropFirst()))
        }
        let words = folded.map { word -> String in
            guard let match = word.wholeMatch(of: /=\?utf-8\?B\?([A-Za-z0-9+\/=]*)\?=/),
                let data = Data(base64Encoded: String(match.1))
            else { return word }
            return String(decoding: data, as: UTF8.self)
        }
        return folded.allSatisfy { $0.hasPrefix("=?utf-8?B?") } ? words.joined() : words.joined(separator: " ")
    }

    /// The six-digit code in the mail.
    var code: String? { text.firstMatch(of: /\b(\d{6})\b/).map { String($0.1) } }

    /// The first link into /auth/v1/verify.
    var link: String? {
        text.firstMatch(of: /(https?:\/\/[^\s"<>]+\/auth\/v1\/verify\?[^\s"<>]+)/).map { String($0.1) }
            .map { $0.replacingOccurrences(of: "&amp;", with: "&") }
    }

    static func decodeQuotedPrintable(_ text: String) -> String {
        let joined = text.replacingOccurrences(of: "=\r\n", with: "").replacingOccurrences(of: "=\n", with: "")
        var bytes: [UInt8] = []
        var iterator = Array(joined.utf8)[...]
        while let byte = iterator.popFirst() {
            if byte == UInt8(ascii: "="), iterator.count >= 2,
                let value = UInt8(String(decoding: iterator.prefix(2), as: UTF8.self), radix: 16)
            {
                bytes.append(value)
                iterator = iterator.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
