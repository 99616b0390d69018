import Foundation
import GatehouseAPI

extension AccountRecord {
    /// The account as its owner sees it, in Supabase's user shape.
    func wire(identities: [IdentityRecord], factors: [FactorRecord] = [], confirmationSentAt: Date? = nil)
        -> Schemas.User
    {
        let providers = identities.map(\.provider).uniqued()
        // An anonymous user has no provider (GoTrue leaves provider and providers out).
        let providerMetadata: [String: JSONValue] =
            isAnonymous && providers.isEmpty
            ? [:]
            : ["provider": .string(providers.first ?? "email"), "providers": .array(providers.map { .string($0) })]
        return Schemas.User(
            id: id, aud: "authenticated", role: "authenticated", email: visibleEmail,
            emailConfirmedAt: emailConfirmedAt,
            confirmedAt: emailConfirmedAt, confirmationSentAt: confirmationSentAt ?? self.confirmationSentAt, phone: "",
            lastSignInAt: lastSignInAt,
            appMetadata: appMetadata.merging(providerMetadata) { $1 },
            userMetadata: userMetadata,
            identities: identities.map { identity in
                var data: [String: JSONValue] = ["sub": .string(identity.providerID)]
                if let email = identity.email {
                    data["email"] = .string(email)
                    data["email_verified"] = .bool(emailConfirmedAt != nil)
                }
                return Schemas.Identity(
                    identityId: identity.id, id: identity.providerID, userId: id, identityData: data,
                    provider: identity.provider, email: identity.email,
                    lastSignInAt: identity.lastSignInAt, createdAt: identity.createdAt,
                    updatedAt: identity.lastSignInAt ?? identity.createdAt)
            },
            createdAt: createdAt, updatedAt: updatedAt, isAnonymous: isAnonymous, isSsoUser: isSSOUser,
            newEmail: emailChange?.newEmail,
            emailChangeSentAt: emailChange?.sentAt,
            // A ban without an end (an operator's disable) shows as a century, as Supabase's dashboard sets one.
            bannedUntil: disabledAt.map { bannedUntil ?? $0.addingTimeInterval(100 * 365 * 86_400) },
            recoverySentAt: recoverySentAt, invitedAt: invitedAt,
            // GoTrue leaves the list out when there is none.
            factors: factors.isEmpty ? nil : factors.map(\.wire))
    }
}

extension FactorRecord {
    /// GoTrue's factor object: `friendly_name` left out when empty, `phone` always "" for these types.
    var wire: Schemas.Factor {
        Schemas.Factor(
            id: id, friendlyName: friendlyName.isEmpty ? nil : friendlyName,
            factorType: type == .totp ? .totp : .recoveryCode, status: status == .verified ? .verified : .unverified,
            phone: "", createdAt: Date(epochMilliseconds: createdAt), updatedAt: Date(epochMilliseconds: updatedAt),
            lastChallengedAt: lastChallengedAt.map(Date.init(epochMilliseconds:)))
    }
}
