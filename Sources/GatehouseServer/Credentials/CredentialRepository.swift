import Foundation
import SQLKit

/// An account's private login for one company. The hash never leaves this type's callers.
struct CompanyCredential: Sendable {
    let companyID: String
    let accountID: String
    let username: String
    var passwordHash: String
    let email: String?
    let superUser: Bool
    let hasImage: Bool
    let createdAt: Date
}

/// SQL for company credentials; every method takes the company id.
struct CredentialRepository {
    let db: any SQLDatabase

    func find(_ companyID: String, accountID: String) async throws -> CompanyCredential? {
        guard
            let row = try await db.raw(
                """
                SELECT company_id, account_id, username, password_hash, email, super_user, created_at,
                       CASE WHEN image IS NULL THEN 0 ELSE 1 END AS has_image
                FROM company_credentials WHERE company_id = \(bind: companyID) AND account_id = \(bind: accountID)
                """
            ).first()
        else { return nil }
        return CompanyCredential(
            companyID: try row.decode(column: "company_id", as: String.self),
            accountID: try row.decode(column: "account_id", as: String.self),
            username: try row.decode(column: "username", as: String.self),
            passwordHash: try row.decode(column: "password_hash", as: String.self),
            email: try row.decode(column: "email", as: String?.self),
            superUser: try row.decode(column: "super_user", as: Int.self) != 0,
            hasImage: try row.decode(column: "has_image", as: Int.self) != 0,
            createdAt: Date(epochMilliseconds: try row.decode(column: "created_at", as: Int64.self)))
    }

    func insert(_ credential: CompanyCredential, image: Data?, imageType: String?, now: Date) async throws {
        try await db.insert(into: "company_credentials")
            .columns(
                "company_id", "account_id", "username", "password_hash", "email", "image", "image_type", "super_user",
                "created_at", "updated_at"
            )
            .values(
                SQLBind(credential.companyID), SQLBind(credential.accountID), SQLBind(credential.username),
                SQLBind(credential.passwordHash), SQLBind(credential.email), SQLBind(image), SQLBind(imageType),
                SQLBind(credential.superUser ? 1 : 0), SQLBind(now.epochMilliseconds), SQLBind(now.epochMilliseconds)
            )
            .run()
    }

    func setPassword(_ companyID: String, accountID: String, hash: String, now: Date) async throws {
        try await db.update("company_credentials").set("password_hash", to: hash).set(
            "updated_at", to: now.epochMilliseconds
        )
        .where("company_id", .equal, companyID).where("account_id", .equal, accountID).run()
    }

    func setSuperUser(_ companyID: String, accountID: String, _ flag: Bool) async throws {
        try await db.update("company_credentials").set("super_user", to: flag ? 1 : 0)
            .where("company_id", .equal, companyID).where("account_id", .equal, accountID).run()
    }

    func delete(_ companyID: String, accountID: String) async throws {
        try await db.delete(from: "company_credentials")
            .where("company_id", .equal, companyID).where("account_id", .equal, accountID).run()
    }

    /// A member's picture and its media type.
    func image(_ companyID: String, accountID: String) async throws -> (Data, String)? {
        guard
            let row = try await db.select().columns("image", "image_type").from("company_credentials")
                .where("company_id", .equal, companyID).where("account_id", .equal, accountID).first(),
            let image = try row.decode(column: "image", as: Data?.self),
            let type = try row.decode(column: "image_type", as: String?.self)
        else { return nil }
        return (image, type)
    }

    /// The media type of a PNG or JPEG, read from its first bytes; nil for anything else.
    static func imageType(_ data: Data) -> String? {
        if data.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "image/png" }
        if data.starts(with: [0xFF, 0xD8, 0xFF]) { return "image/jpeg" }
        return nil
    }
}
