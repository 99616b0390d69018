import Foundation
import SQLKit

/// A stored signing key: its id, its private key as stored (sealed), and when it was retired.
struct SigningKeyRow: Decodable {
    let kid: String
    let pem: String
    let retiredAt: Date?

    enum CodingKeys: String, CodingKey {
        case kid
        case pem = "private_key"
        case retiredAt = "retired_at"
    }

    init(from decoder: any Decoder) throws {
        let row = try decoder.container(keyedBy: CodingKeys.self)
        kid = try row.decode(String.self, forKey: .kid)
        pem = try row.decode(String.self, forKey: .pem)
        retiredAt = try row.decodeIfPresent(Int64.self, forKey: .retiredAt).map(Date.init(epochMilliseconds:))
    }
}

/// The SQL of the signing keys.
struct SigningKeyRepository {
    let db: any SQLDatabase

    /// The keys not retired, or retired after `oldestKept`, oldest first.
    func keys(retiredAfter oldestKept: Date) async throws -> [SigningKeyRow] {
        try await db.select().columns("kid", "private_key", "retired_at").from("signing_keys")
            .where {
                $0.where("retired_at", .is, SQLLiteral.null)
                    .orWhere("retired_at", .greaterThan, oldestKept.epochMilliseconds)
            }
            .orderBy("created_at").all(decoding: SigningKeyRow.self)
    }

    /// Adds an ES256 key whose private key is `privateKey` as stored (sealed), made at `createdAt` (epoch ms).
    func insert(_ kid: String, privateKey: String, createdAt: Int64) async throws {
        try await db.insert(into: "signing_keys")
            .columns("kid", "algorithm", "private_key", "created_at")
            .values(SQLBind(kid), SQLBind("ES256"), SQLBind(privateKey), SQLBind(createdAt))
            .run()
    }

    /// Stores the key's private key sealed anew.
    func reseal(_ kid: String, privateKey: String) async throws {
        try await db.update("signing_keys").set("private_key", to: privateKey).where("kid", .equal, kid).run()
    }

    /// Retires every active key at `now`; returns their ids.
    func retireActive(at now: Date) async throws -> [String] {
        let active = try await db.select().column("kid").from("signing_keys")
            .where("retired_at", .is, SQLLiteral.null).all(decodingColumn: "kid", as: String.self)
        try await db.update("signing_keys").set("retired_at", to: now.epochMilliseconds)
            .where("retired_at", .is, SQLLiteral.null).run()
        return active
    }
}
