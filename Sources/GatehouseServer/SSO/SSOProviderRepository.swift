import Foundation
import GatehouseAPI
import SQLKit

/// A company's identity provider as stored: SAML (its IdP metadata) or OIDC (a custom provider's registration).
struct SSOProviderRecord: Sendable {
    enum Kind: String, Sendable { case saml, oidc }

    let id: String
    var companyID: String
    let kind: Kind
    var resourceID: String?
    var disabled: Bool
    /// SAML: the IdP's entity id, read from its metadata.
    var entityID: String?
    var metadataXML: String?
    var metadataURL: String?
    var attributeMapping: [String: JSONValue] = [:]
    var nameIDFormat: String?
    /// OIDC: the registration, as a custom provider's (identifier `sso:<id>`), and its client secret sealed.
    var oidc: CustomProviderSettings?
    var sealedSecret: String?
    var domains: [String] = []
    let createdAt: Date
    var updatedAt: Date

    /// The identities it signs in are `sso:<id>`, as GoTrue names them.
    var identityProvider: String { "sso:\(id)" }
}

/// A sign-in sent to a SAML IdP and not yet back (GoTrue's saml_relay_states).
struct SAMLRelayStateRecord: Sendable, Codable {
    let id: String
    let providerID: String
    let requestID: String
    let redirectTo: String
    let codeChallenge: String?
    let createdAt: Int64
    let expiresAt: Int64
    let usedAt: Int64?

    enum CodingKeys: String, CodingKey {
        case id, providerID = "provider_id", requestID = "request_id", redirectTo = "redirect_to"
        case codeChallenge = "code_challenge", createdAt = "created_at", expiresAt = "expires_at", usedAt = "used_at"
    }
}

/// SQL for identity providers, their domains, the SAML trips under way, the assertions seen, and the companies that
/// require their provider.
struct SSOProviderRepository {
    let db: any SQLDatabase

    private static let columns = [
        "id", "company_id", "type", "resource_id", "disabled", "entity_id", "metadata_xml", "metadata_url",
        "attribute_mapping", "name_id_format", "oidc", "sealed_secret", "created_at", "updated_at",
    ]

    func all() async throws -> [SSOProviderRecord] {
        try await withDomains(
            db.select().columns(Self.columns).from("sso_providers").orderBy("created_at").orderBy("id").all())
    }

    func find(id: String) async throws -> SSOProviderRecord? {
        try await withDomains(db.select().columns(Self.columns).from("sso_providers").where("id", .equal, id).all())
            .first
    }

    func find(resourceID: String) async throws -> SSOProviderRecord? {
        try await withDomains(
            db.select().columns(Self.columns).from("sso_providers").where("resource_id", .equal, resourceID).all()
        ).first
    }

    func find(entityID: String) async throws -> SSOProviderRecord? {
        try await withDomains(
            db.select().columns(Self.columns).from("sso_providers").where("entity_id", .equal, entityID).all()
        ).first
    }

    /// The provider that signs in `domain`, if any.
    func find(domain: String) async throws -> SSOProviderRecord? {
        guard
            let id = try await db.select().column("provider_id").from("sso_domains").where("domain", .equal, domain)
                .first()?.decode(column: "provider_id", as: String.self)
        else { return nil }
        return try await find(id: id)
    }

    /// The company's providers, oldest first.
    func all(companyID: String) async throws -> [SSOProviderRecord] {
        try await withDomains(
            db.select().columns(Self.columns).from("sso_providers").where("company_id", .equal, companyID)
                .orderBy("created_at").all())
    }

    /// Those of `domains` another provider than `providerID` holds.
    func taken(_ domains: [String], except providerID: String?) async throws -> [String] {
        guard !domains.isEmpty else { return [] }
        var query = db.select().column("domain").from("sso_domains").where("domain", .in, domains)
        if let providerID { query = query.where("provider_id", .notEqual, providerID) }
        return try await query.all().map { try $0.decode(column: "domain", as: String.self) }
    }

    /// Inserts `record` and its domains; false when its resource id is held already. (An entity id held already is
    /// the caller's to refuse, with its own code; the unique index holds the rule against a race.)
    func insert(_ record: SSOProviderRecord) async throws -> Bool {
        if let resourceID = record.resourceID, try await find(resourceID: resourceID) != nil { return false }
        try await db.insert(into: "sso_providers").columns(Self.columns)
            .values(
                SQLBind(record.id), SQLBind(record.companyID), SQLBind(record.kind.rawValue),
                SQLBind(record.resourceID), SQLBind(record.disabled ? 1 : 0), SQLBind(record.entityID),
                SQLBind(record.metadataXML), SQLBind(record.metadataURL),
                SQLBind(try Self.encode(record.attributeMapping)),
                SQLBind(record.nameIDFormat), SQLBind(try record.oidc.map(Self.encode)), SQLBind(record.sealedSecret),
                SQLBind(record.createdAt.epochMilliseconds), SQLBind(record.updatedAt.epochMilliseconds)
            )
            .run()
        try await replaceDomains(record)
        return true
    }

    /// Writes every mutable field and the domains.
    func update(_ record: SSOProviderRecord) async throws {
        try await db.update("sso_providers")
            .set("resource_id", to: record.resourceID).set("disabled", to: record.disabled ? 1 : 0)
            .set("entity_id", to: record.entityID).set("metadata_xml", to: record.metadataXML)
            .set("metadata_url", to: record.metadataURL)
            .set("attribute_mapping", to: try Self.encode(record.attributeMapping))
            .set("name_id_format", to: record.nameIDFormat).set("oidc", to: try record.oidc.map(Self.encode))
            .set("sealed_secret", to: record.sealedSecret).set("updated_at", to: record.updatedAt.epochMilliseconds)
            .where("id", .equal, record.id).run()
        try await replaceDomains(record)
    }

    func delete(id: String) async throws -> Bool {
        try await db.delete(from: "sso_domains").where("provider_id", .equal, id).run()
        return try await !db.delete(from: "sso_providers").where("id", .equal, id).returning("id").all().isEmpty
    }

    private func replaceDomains(_ record: SSOProviderRecord) async throws {
        try await db.delete(from: "sso_domains").where("provider_id", .equal, record.id).run()
        for domain in record.domains {
            try await db.insert(into: "sso_domains").columns("domain", "provider_id", "created_at")
                .values(SQLBind(domain), SQLBind(record.id), SQLBind(record.updatedAt.epochMilliseconds)).run()
        }
    }

    // MARK: SAML trips and assertions

    func insert(_ state: SAMLRelayStateRecord) async throws {
        try await db.insert(into: "saml_relay_states").model(state).run()
    }

    /// Spends the trip `id` names: the row when this call spent it, nil when it is unknown or spent already.
    func use(relayState id: String, now: Int64) async throws -> SAMLRelayStateRecord? {
        try await db.update("saml_relay_states").set("used_at", to: now).where("id", .equal, id)
            .where("used_at", .is, SQLLiteral.null).returning(SQLLiteral.all).first(decoding: SAMLRelayStateRecord.self)
    }

    func find(relayState id: String) async throws -> SAMLRelayStateRecord? {
        try await db.select().column(SQLLiteral.all).from("saml_relay_states").where("id", .equal, id)
            .first(decoding: SAMLRelayStateRecord.self)
    }

    /// Records that the assertion `id` of the provider was used; false when it was before (a replay).
    func claimAssertion(providerID: String, id: String, expiresAt: Int64) async throws -> Bool {
        try await !db.insert(into: "saml_assertions").columns("provider_id", "assertion_id", "expires_at")
            .values(SQLBind(providerID), SQLBind(id), SQLBind(expiresAt))
            .ignoringConflicts(with: ["provider_id", "assertion_id"]).returning("assertion_id").all().isEmpty
    }

    // MARK: Companies that require their provider

    func required(companyID: String) async throws -> Bool {
        try await db.select().column("required").from("company_sso").where("company_id", .equal, companyID).first()?
            .decode(column: "required", as: Int64.self) == 1
    }

    func setRequired(companyID: String, _ required: Bool, now: Date) async throws {
        try await db.insert(into: "company_sso").columns("company_id", "required", "updated_at")
            .values(SQLBind(companyID), SQLBind(required ? 1 : 0), SQLBind(now.epochMilliseconds))
            .onConflict(with: "company_id") { $0.set(excludedValueOf: "required").set(excludedValueOf: "updated_at") }
            .run()
    }

    /// The enabled provider that must sign in `domain`: one of a company that requires single sign-on and holds the
    /// domain verified (a domain only the operator named sends nobody away from their password).
    func enforced(domain: String) async throws -> SSOProviderRecord? {
        let row = try await db.select().column(SQLColumn("id", table: "sso_providers")).from("sso_domains")
            .join(
                "sso_providers", on: SQLColumn("provider_id", table: "sso_domains"), .equal,
                SQLColumn("id", table: "sso_providers")
            )
            .join(
                "company_sso", on: SQLColumn("company_id", table: "company_sso"), .equal,
                SQLColumn("company_id", table: "sso_providers")
            )
            .join(
                "company_domains",
                on: SQLBinaryExpression(
                    SQLBinaryExpression(
                        SQLColumn("company_id", table: "company_domains"), .equal,
                        SQLColumn("company_id", table: "sso_providers")), .and,
                    SQLBinaryExpression(
                        SQLColumn("domain", table: "company_domains"), .equal, SQLColumn("domain", table: "sso_domains")
                    ))
            )
            .where(SQLColumn("domain", table: "sso_domains"), .equal, SQLBind(domain))
            .where(SQLColumn("disabled", table: "sso_providers"), .equal, SQLBind(0))
            .where(SQLColumn("required", table: "company_sso"), .equal, SQLBind(1))
            .where(SQLColumn("verified_at", table: "company_domains"), .isNot, SQLLiteral.null)
            .first()
        guard let id = try row?.decode(column: "id", as: String.self) else { return nil }
        return try await find(id: id)
    }

    // MARK: Rows

    private func withDomains(_ rows: [any SQLRow]) async throws -> [SSOProviderRecord] {
        var records = try rows.map(Self.decode)
        guard !records.isEmpty else { return [] }
        let domains = try await db.select().columns("domain", "provider_id").from("sso_domains")
            .where("provider_id", .in, records.map(\.id)).orderBy("domain").all()
        var byProvider: [String: [String]] = [:]
        for row in domains {
            byProvider[try row.decode(column: "provider_id", as: String.self), default: []].append(
                try row.decode(column: "domain", as: String.self))
        }
        for index in records.indices { records[index].domains = byProvider[records[index].id] ?? [] }
        return records
    }

    private static func encode<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try JSONEncoder.sortedKeys.encode(value), as: UTF8.self)
    }

    private static func decode(_ row: any SQLRow) throws -> SSOProviderRecord {
        let mapping = try row.decode(column: "attribute_mapping", as: String?.self)
        let oidc = try row.decode(column: "oidc", as: String?.self)
        return SSOProviderRecord(
            id: try row.decode(column: "id", as: String.self),
            companyID: try row.decode(column: "company_id", as: String.self),
            kind: SSOProviderRecord.Kind(rawValue: try row.decode(column: "type", as: String.self)) ?? .saml,
            resourceID: try row.decode(column: "resource_id", as: String?.self),
            disabled: try row.decode(column: "disabled", as: Int64.self) != 0,
            entityID: try row.decode(column: "entity_id", as: String?.self),
            metadataXML: try row.decode(column: "metadata_xml", as: String?.self),
            metadataURL: try row.decode(column: "metadata_url", as: String?.self),
            attributeMapping: mapping.flatMap {
                try? JSONDecoder().decode([String: JSONValue].self, from: Data($0.utf8))
            } ?? [:],
            nameIDFormat: try row.decode(column: "name_id_format", as: String?.self),
            oidc: try oidc.map { try JSONDecoder().decode(CustomProviderSettings.self, from: Data($0.utf8)) },
            sealedSecret: try row.decode(column: "sealed_secret", as: String?.self),
            createdAt: Date(epochMilliseconds: try row.decode(column: "created_at", as: Int64.self)),
            updatedAt: Date(epochMilliseconds: try row.decode(column: "updated_at", as: Int64.self)))
    }
}
