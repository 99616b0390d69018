import Foundation
import GatehouseJSON

extension AuthHooks {
    /// The before user created hook for an account about to be made at `email` with the id `id`, asked before the
    /// transaction that makes it (as GoTrue asks): only when the hook is on and the address has no account yet. A
    /// refusal throws the hook's error and stops the request.
    func beforeCreatingAccount(
        id: String, email: String, provider: String, metadata: JSONFields, confirmed: Bool = false, now: Date,
        store: Store
    ) async throws {
        guard isOn(.beforeUserCreated), try await AccountRepository(db: store.database).find(email: email) == nil
        else { return }
        try await beforeUserCreated(
            Self.prospectiveUser(
                id: id, email: email, provider: provider, metadata: metadata, confirmed: confirmed, now: now))
    }
}

extension ExternalIdentity {
    /// The `user_metadata` a new account starts with: the profile the provider gave (name, picture), with
    /// `full_name` from `name`, as GoTrue fills it from the identity's data.
    var accountMetadata: JSONFields {
        var metadata = profile
        if let name = metadata["name"], metadata["full_name"] == nil { metadata["full_name"] = name }
        return metadata
    }
}
