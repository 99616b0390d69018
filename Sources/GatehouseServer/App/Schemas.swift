import GatehouseAPI

/// The wire types generated from `openapi.yaml`.
typealias Schemas = Components.Schemas

// The document's enums and the domain's: the same cases, so each maps one to one.

extension Schemas.Tier {
    init(_ tier: CompanyTier) {
        switch tier {
        case .free: self = .free
        case .business: self = .business
        case .enterprise: self = .enterprise
        }
    }
}

extension Schemas.Role {
    init(_ role: MemberRole) {
        switch role {
        case .owner: self = .owner
        case .member: self = .member
        case .readOnly: self = .readOnly
        }
    }
}

extension Schemas.Permission {
    init(_ permission: SharePermission) {
        switch permission {
        case .readWrite: self = .readWrite
        case .readOnly: self = .readOnly
        }
    }
}

extension SharePermission {
    init(_ permission: Schemas.Permission) {
        switch permission {
        case .readWrite: self = .readWrite
        case .readOnly: self = .readOnly
        }
    }
}
