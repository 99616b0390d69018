import Foundation
import GatehouseServer
import Testing

/// One small helper per company endpoint.
extension AuthClient {
    func createCompany(_ name: String, bearer: String) async throws -> HTTPReply {
        try await post("/v1/companies", ["name": name], bearer: bearer)
    }

    func createCredential(
        _ cid: String, username: String, password: String, email: String? = nil, image: String? = nil, bearer: String
    ) async throws -> HTTPReply {
        var body: [String: Any] = ["username": username, "password": password]
        if let email { body["email"] = email }
        if let image { body["image"] = image }
        return try await put("/v1/companies/\(cid)/credential", body, bearer: bearer)
    }

    func companyLogin(_ cid: String, username: String?, password: String?, bearer: String) async throws -> HTTPReply {
        var body: [String: Any] = [:]
        if let username { body["username"] = username }
        if let password { body["password"] = password }
        return try await post("/v1/companies/\(cid)/login", body, bearer: bearer)
    }

    func createShare(_ cid: String, permission: String, extra: [String: Any] = [:], bearer: String) async throws
        -> HTTPReply
    {
        try await post("/v1/companies/\(cid)/shares", ["permission": permission].merging(extra) { $1 }, bearer: bearer)
    }

    func accept(_ token: String, bearer: String) async throws -> HTTPReply {
        try await post("/v1/shares/\(token)/accept", [:], bearer: bearer)
    }

    func patch(_ path: String, _ body: [String: Any], bearer: String?) async throws -> HTTPReply {
        let data = try JSONSerialization.data(withJSONObject: body)
        var headers = self.headers
        if let bearer { headers.append(("Authorization", "Bearer \(bearer)")) }
        return try await http.send(.PATCH, base + path, body: String(decoding: data, as: UTF8.self), headers: headers)
    }
}

/// A person in the company tests: their account session, and once logged in, their company session.
struct Person {
    let email: String
    let account: SignedIn
    var company: SignedIn?
    var id: String { account.userID }
}

extension AccountHarness {
    /// A confirmed account, signed in.
    func person(_ tag: String) async throws -> Person {
        let email = Self.newEmail(tag)
        return Person(email: email, account: try await confirmedAccount(email))
    }

    /// Creates a company owned by `owner` at `tier`, with the owner's credential, and logs the owner in to it.
    func company(_ name: String, owner: inout Person, tier: CompanyTier = .business) async throws -> String {
        let created = try await client.createCompany(name, bearer: owner.account.access)
        #expect(created.status == 201)
        let cid = try #require(created.json["id"] as? String)
        if tier != .free { #expect(try await Operator(store: server.services.store).setTier(cid, tier)) }
        #expect(
            try await client.createCredential(
                cid, username: "boss", password: "company secret 1", bearer: owner.account.access
            ).status == 201)
        owner.company = try SignedIn(
            try await client.companyLogin(
                cid, username: "boss", password: "company secret 1", bearer: owner.account.access))
        return cid
    }

    /// `person` joins through a new share link of `permission`, makes a credential and logs in.
    func join(_ cid: String, _ person: inout Person, owner: Person, permission: String = "read_write") async throws {
        let share = try await client.createShare(
            cid, permission: permission, bearer: try #require(owner.company?.access))
        #expect(share.status == 201)
        let token = try #require(share.json["token"] as? String)
        #expect(try await client.accept(token, bearer: person.account.access).status == 200)
        let username = "user-\(person.id.prefix(6))"
        #expect(
            try await client.createCredential(
                cid, username: username, password: "member secret 1", bearer: person.account.access
            ).status == 201)
        person.company = try SignedIn(
            try await client.companyLogin(
                cid, username: username, password: "member secret 1", bearer: person.account.access))
    }
}
