import AsyncHTTPClient
import Foundation
import GatehouseAPI
import NIOCore
import SQLKit

/// GoTrue's admin API for single sign-on (`/auth/v1/admin/sso/providers`), with the company each provider signs people
/// in to (`company_id`, our extension; the company must be on the Enterprise tier). `type` is `saml` (GoTrue's only
/// kind: the IdP's `metadata_xml`, or a `metadata_url` fetched over https) or `oidc` (our extension: an OpenID
/// provider registered as a custom provider is, its client secret sealed and never answered).
struct SSOProviders: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let trail: AuditTrail
    let box: SecretBox

    static let notFound = APIError(
        .notFound, code: .ssoProviderNotFound, message: "SSO Identity Provider not found")

    /// The NameID formats an AuthnRequest may ask for (GoTrue's list).
    static let nameIDFormats = [
        "urn:oasis:names:tc:SAML:2.0:nameid-format:persistent",
        "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress",
        "urn:oasis:names:tc:SAML:2.0:nameid-format:transient",
        "urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified",
    ]

    static func context(_ id: String) -> String { "sso-provider:\(id)" }

    func list(resourceID: String?, resourceIDPrefix: String?) async throws -> Schemas.SSOProviderList {
        let all = try await SSOProviderRepository(db: store.database).all()
        let kept = all.filter { record in
            if let resourceID, record.resourceID != resourceID { return false }
            if let resourceIDPrefix, !(record.resourceID ?? "").hasPrefix(resourceIDPrefix) { return false }
            return true
        }
        // GoTrue leaves each provider's metadata_xml out of the list.
        return .init(items: kept.map { Self.wire($0, withMetadata: false) })
    }

    func get(_ idpID: String) async throws -> Schemas.SSOProvider {
        Self.wire(try await find(idpID, db: store.database))
    }

    /// `{idp_id}`: a provider's UUID, or `resource_<id>` for its resource id.
    private func find(_ idpID: String, db: any SQLDatabase) async throws -> SSOProviderRecord {
        let repository = SSOProviderRepository(db: db)
        let found: SSOProviderRecord? =
            if idpID.hasPrefix("resource_") {
                try await repository.find(resourceID: String(idpID.dropFirst("resource_".count)))
            } else if let id = Secrets.identifier(idpID) {
                try await repository.find(id: id)
            } else {
                nil
            }
        guard let found else { throw Self.notFound }
        return found
    }

    func create(_ body: Schemas.SSOProviderRequest, by admin: AdminCaller) async throws -> Schemas.SSOProvider {
        let kind: SSOProviderRecord.Kind
        switch body._type {
        case "saml": kind = .saml
        case "oidc": kind = .oidc
        default: throw APIError.validation("Only 'saml' and 'oidc' supported for SSO provider type")
        }
        guard let companyID = body.companyId.flatMap(Secrets.identifier) else {
            throw APIError.validation("company_id is required: the company whose people this provider signs in")
        }
        let now = clock.now
        let id = Secrets.identifier()
        var record = SSOProviderRecord(
            id: id, companyID: companyID, kind: kind, resourceID: nil, disabled: body.disabled ?? false,
            createdAt: now, updatedAt: now)
        switch kind {
        case .saml:
            guard body.oidc == nil else { throw APIError.validation("oidc is only for providers of type 'oidc'") }
            guard body.metadataXml != nil || body.metadataUrl != nil else {
                throw APIError.validation("Either metadata_xml or metadata_url must be set")
            }
        case .oidc:
            guard body.metadataXml == nil, body.metadataUrl == nil, body.nameIdFormat == nil else {
                throw APIError.validation("metadata_xml, metadata_url and name_id_format are only for 'saml' providers")
            }
            guard let oidc = body.oidc else { throw APIError.validation("oidc is required for type 'oidc'") }
            record.oidc = try Self.registration(oidc, id: id, existing: nil)
            guard let secret = oidc.clientSecret, !secret.isEmpty else {
                throw APIError.validation("oidc.client_secret is required")
            }
            record.sealedSecret = try box.seal(secret, context: Self.context(id))
        }
        try await apply(body, to: &record)
        let created = record
        try await store.transaction { db in
            try await Self.checkCompany(companyID, db: db)
            let repository = SSOProviderRepository(db: db)
            try await Self.checkDomains(created.domains, for: nil, repository)
            if let entityID = created.entityID, try await repository.find(entityID: entityID) != nil {
                throw APIError(
                    .unprocessableContent, code: .samlIdpAlreadyExists,
                    message: "SAML Identity Provider with this EntityID (\(entityID)) already exists")
            }
            guard try await repository.insert(created) else {
                throw APIError(.badRequest, code: .conflict, message: "resource_id is held by another provider")
            }
            try await trail.within(db).record(
                admin.event(
                    .ssoProviderCreated, accountID: nil,
                    detail: ["provider": id, "type": kind.rawValue, "company": companyID]))
        }
        return Self.wire(created)
    }

    func update(_ idpID: String, _ body: Schemas.SSOProviderRequest, by admin: AdminCaller) async throws
        -> Schemas.SSOProvider
    {
        var record = try await find(idpID, db: store.database)
        if let type = body._type, type != record.kind.rawValue {
            throw APIError.validation("type cannot change; delete the provider and register it again")
        }
        if let company = body.companyId, Secrets.identifier(company) != record.companyID {
            throw APIError.validation("company_id cannot change; delete the provider and register it again")
        }
        let before = record.entityID
        if record.kind == .oidc {
            guard body.metadataXml == nil, body.metadataUrl == nil, body.nameIdFormat == nil else {
                throw APIError.validation("metadata_xml, metadata_url and name_id_format are only for 'saml' providers")
            }
            if let oidc = body.oidc {
                record.oidc = try Self.registration(oidc, id: record.id, existing: record.oidc)
                if let secret = oidc.clientSecret, !secret.isEmpty {
                    record.sealedSecret = try box.seal(secret, context: Self.context(record.id))
                }
            }
        } else if body.oidc != nil {
            throw APIError.validation("oidc is only for providers of type 'oidc'")
        }
        if let disabled = body.disabled { record.disabled = disabled }
        try await apply(body, to: &record)
        if let before, let after = record.entityID, before != after {
            throw APIError(
                .badRequest, code: .samlEntityIdMismatch,
                message:
                    "SAML Metadata can be updated only if the EntityID matches for the provider; expected '\(before)' "
                    + "but got '\(after)'")
        }
        record.updatedAt = clock.now
        let updated = record
        try await store.transaction { db in
            let repository = SSOProviderRepository(db: db)
            try await Self.checkDomains(updated.domains, for: updated.id, repository)
            try await repository.update(updated)
            try await trail.within(db).record(
                admin.event(.ssoProviderUpdated, accountID: nil, detail: ["provider": updated.id]))
        }
        return Self.wire(updated)
    }

    /// Removes a provider and answers it, as GoTrue does (200). Its accounts stay, and no longer sign in.
    func delete(_ idpID: String, by admin: AdminCaller) async throws -> Schemas.SSOProvider {
        try await store.transaction { db in
            let record = try await find(idpID, db: db)
            guard try await SSOProviderRepository(db: db).delete(id: record.id) else { throw Self.notFound }
            try await trail.within(db).record(
                admin.event(.ssoProviderDeleted, accountID: nil, detail: ["provider": record.id]))
            return Self.wire(record)
        }
    }

    // MARK: Fields

    /// The fields both create and update take: the SAML metadata (read, and fetched when given by URL), the
    /// domains, the attribute mapping, the NameID format, the resource id.
    private func apply(_ body: Schemas.SSOProviderRequest, to record: inout SSOProviderRecord) async throws {
        if record.kind == .saml {
            if body.metadataXml != nil, body.metadataUrl != nil {
                throw APIError.validation("Only one of metadata_xml or metadata_url needs to be set")
            }
            if let url = body.metadataUrl {
                guard let parsed = URL(string: url), parsed.host != nil else {
                    throw APIError.validation("metadata_url is not a valid URL")
                }
                guard parsed.scheme?.lowercased() == "https" else {
                    throw APIError.validation("metadata_url is not a HTTPS URL")
                }
                record.metadataXML = try await Self.fetch(url)
                record.metadataURL = url
            } else if let xml = body.metadataXml {
                record.metadataXML = xml
                record.metadataURL = nil
            }
            if let xml = record.metadataXML, body.metadataXml != nil || body.metadataUrl != nil {
                record.entityID = try Self.metadata(xml, now: clock.now).entityID
            }
            if let format = body.nameIdFormat {
                guard format.isEmpty || Self.nameIDFormats.contains(format) else {
                    throw APIError.validation(
                        "name_id_format must be unspecified or one of \(Self.nameIDFormats.joined(separator: ", "))")
                }
                record.nameIDFormat = format.isEmpty ? nil : format
            }
        }
        if let domains = body.domains {
            var normalized: [String] = []
            for domain in domains {
                guard let clean = DomainRules.normalized(domain) else {
                    throw APIError.validation("\(String(domain.prefix(80)).debugDescription) is not a domain name")
                }
                if !normalized.contains(clean) { normalized.append(clean) }
            }
            record.domains = normalized
        }
        if let mapping = body.attributeMapping {
            try SSOAttributeMapping.check(mapping)
            record.attributeMapping = mapping
        }
        if let resourceID = body.resourceId { record.resourceID = resourceID.isEmpty ? nil : resourceID }
    }

    /// An OIDC provider's registration as a custom provider (`sso:<id>`), from the request's `oidc` object.
    private static func registration(
        _ oidc: Schemas.SSOProviderRequest.OidcPayload, id: String, existing: CustomProviderSettings?
    ) throws -> CustomProviderSettings {
        var settings =
            existing
            ?? CustomProviderSettings(
                id: id, providerType: "oidc", identifier: "sso:\(id)", name: "Single sign-on", clientID: "")
        if let issuer = oidc.issuer {
            guard let url = URL(string: issuer), ["https", "http"].contains(url.scheme ?? ""), url.host != nil else {
                throw APIError.validation("oidc.issuer must be a URL")
            }
            settings.issuer = issuer
        }
        if let clientID = oidc.clientId { settings.clientID = clientID }
        if let scopes = oidc.scopes { settings.scopes = scopes }
        if let discovery = oidc.discoveryUrl { settings.discoveryURL = discovery.isEmpty ? nil : discovery }
        guard settings.issuer != nil, !settings.clientID.isEmpty else {
            throw APIError.validation("oidc.issuer and oidc.client_id are required")
        }
        return settings
    }

    /// The company exists and is on the Enterprise tier.
    private static func checkCompany(_ companyID: String, db: any SQLDatabase) async throws {
        guard let company = try await CompanyDirectory(db: db).company(companyID) else {
            throw APIError(.notFound, code: .notFound, message: "Company not found")
        }
        guard company.tier == .enterprise else {
            throw APIError(
                .forbidden, code: .forbidden,
                message:
                    "Single sign-on is an Enterprise tier feature: this company is on the \(company.tier.rawValue) tier"
            )
        }
    }

    private static func checkDomains(
        _ domains: [String], for providerID: String?, _ repository: SSOProviderRepository
    ) async throws {
        if let taken = try await repository.taken(domains, except: providerID).first {
            throw APIError(
                .badRequest, code: .ssoDomainAlreadyExists,
                message: "SSO Domain '\(taken)' is already assigned to an SSO identity provider")
        }
    }

    static func metadata(_ xml: String, now: Date) throws -> SAMLMetadata {
        do {
            return try SAMLMetadata.parse(xml, now: now)
        } catch {
            throw APIError.validation("SAML Metadata is not usable: \(error)")
        }
    }

    /// The IdP's metadata from `url`: at most 1 MiB, within 10 seconds.
    static func fetch(_ url: String) async throws -> String {
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Accept", value: "application/xml;charset=UTF-8")
        let response: HTTPClientResponse
        let body: ByteBuffer
        do {
            response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            body = try await response.body.collect(upTo: 1 << 20)
        } catch {
            throw APIError(
                .badRequest, code: .samlMetadataFetchFailed,
                message: "SAML Metadata could not be fetched from URL '\(url)'")
        }
        guard response.status.code == 200 else {
            throw APIError(
                .badRequest, code: .samlMetadataFetchFailed,
                message: "HTTP \(response.status.code) error fetching SAML Metadata from URL '\(url)'")
        }
        guard let text = String(validating: Data(buffer: body), as: UTF8.self) else {
            throw APIError.validation(
                "SAML Metadata XML contains invalid UTF-8 characters, which are not supported at this time")
        }
        return text
    }

    // MARK: Wire

    static func wire(_ record: SSOProviderRecord, withMetadata: Bool = true) -> Schemas.SSOProvider {
        Schemas.SSOProvider(
            id: record.id, resourceId: record.resourceID, disabled: record.disabled, companyId: record.companyID,
            _type: record.kind.rawValue,
            saml: record.kind == .saml
                ? .init(
                    entityId: record.entityID ?? "", metadataXml: withMetadata ? record.metadataXML : nil,
                    metadataUrl: record.metadataURL,
                    attributeMapping: record.attributeMapping,
                    nameIdFormat: record.nameIDFormat)
                : nil,
            oidc: record.oidc.map {
                .init(issuer: $0.issuer ?? "", clientId: $0.clientID, scopes: $0.scopes, discoveryUrl: $0.discoveryURL)
            },
            domains: record.domains.map { .init(domain: $0) }, createdAt: record.createdAt,
            updatedAt: record.updatedAt)
    }
}

/// GoTrue's `attribute_mapping`: `{"keys": {"<claim>": {"name": "...", "names": [...], "default": any, "array":
/// bool}}}`, read from a SAML assertion's attributes.
enum SSOAttributeMapping {
    /// Refuses a mapping that is not of that shape.
    static func check(_ mapping: [String: JSONValue]) throws {
        for key in mapping.keys where key != "keys" {
            throw APIError.validation(
                "attribute_mapping takes only \"keys\", not \(String(key.prefix(40)).debugDescription)")
        }
        guard let keys = mapping["keys"] else { return }
        guard case .object(let claims) = keys else {
            throw APIError.validation("attribute_mapping.keys must be an object")
        }
        for (claim, rule) in claims {
            guard case .object(let fields) = rule else {
                throw APIError.validation("attribute_mapping.keys.\(String(claim.prefix(40))) must be an object")
            }
            if let name = fields["name"], case .string = name {
            } else if fields["name"] != nil {
                throw APIError.validation("attribute_mapping.keys.\(String(claim.prefix(40))).name must be a string")
            }
            if let names = fields["names"] {
                guard case .array(let list) = names, list.allSatisfy({ if case .string = $0 { true } else { false } })
                else {
                    throw APIError.validation(
                        "attribute_mapping.keys.\(String(claim.prefix(40))).names must be a list of strings")
                }
            }
        }
    }

    /// The claims `mapping` reads from `attributes` (matched on name, case-insensitively): the first of `name` and
    /// `names` with a value; every value with `array`; else `default`.
    static func claims(_ mapping: [String: JSONValue], from attributes: [String: [String]]) -> [String: JSONValue] {
        guard case .object(let keys)? = mapping["keys"] else { return [:] }
        var lowered: [String: [String]] = [:]
        for (name, values) in attributes { lowered[name.lowercased(), default: []] += values }
        var claims: [String: JSONValue] = [:]
        for (claim, rule) in keys {
            guard case .object(let fields) = rule else { continue }
            var names: [String] = []
            if case .string(let name)? = fields["name"], !name.isEmpty { names.append(name) }
            if case .array(let list)? = fields["names"] {
                for case .string(let name) in list { names.append(name) }
            }
            let array = fields["array"] == .bool(true)
            for name in names {
                let values = (lowered[name.lowercased()] ?? []).filter { !$0.isEmpty }
                guard let first = values.first else { continue }
                claims[claim] = array ? .array(values.map { .string($0) }) : .string(first)
                break
            }
            if claims[claim] == nil, let fallback = fields["default"], fallback != .null { claims[claim] = fallback }
        }
        return claims
    }
}
