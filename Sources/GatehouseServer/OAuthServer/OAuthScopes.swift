/// The scopes a client may ask for, and the rules between a request, a client's registration and a user's consent.
/// Pure: no I/O.
enum OAuthScopes {
    /// An id token and the `sub` of userinfo.
    static let openID = "openid"
    /// The user's address (the default when a request names none, as GoTrue).
    static let email = "email"
    static let profile = "profile"
    static let phone = "phone"
    /// Refresh tokens for use while the user is away (OpenID Connect §11).
    static let offlineAccess = "offline_access"
    /// A company the user chooses during the authorization, with the member's role and masks in the token: only after
    /// the user passed that company's login.
    static let company = "company"

    /// Every scope this server knows, in the order discovery lists them.
    static let supported = [openID, email, profile, phone, offlineAccess, company]

    /// What a client is registered for when its registration names no scope: everything but the company scope,
    /// which the operator grants a client on purpose.
    static let registrationDefault = [openID, email, profile, phone, offlineAccess]

    /// A scope this server does not know; its description is its name.
    struct Unknown: Error, CustomStringConvertible {
        let description: String
    }

    /// A scope parameter as a list, in its order, without repeats: the default (`email`) when absent or blank; a
    /// failure names the first scope this server does not know.
    static func parse(_ text: String?) -> Result<[String], Unknown> {
        let items = (text ?? "").split(whereSeparator: { $0 == " " || $0 == "+" }).map(String.init)
        guard !items.isEmpty else { return .success([email]) }
        var seen: [String] = []
        for item in items where !seen.contains(item) {
            guard supported.contains(item) else { return .failure(Unknown(description: item)) }
            seen.append(item)
        }
        return .success(seen)
    }

    /// The scopes of `requested` the client's registration does not allow, in order.
    static func notAllowed(_ requested: [String], client: OAuthClient) -> [String] {
        let allowed = Set(client.scope.split(separator: " ").map(String.init))
        return requested.filter { !allowed.contains($0) }
    }

    /// Whether an earlier consent already covers every requested scope (then the user is not asked again).
    static func covers(granted: [String], requested: [String]) -> Bool {
        Set(requested).isSubset(of: Set(granted))
    }

    /// The consent after a new approval: what was granted before and what is granted now, in the known order.
    static func merged(_ granted: [String], _ added: [String]) -> [String] {
        let all = Set(granted).union(added)
        return supported.filter { all.contains($0) }
    }

    static func text(_ scopes: [String]) -> String { scopes.joined(separator: " ") }
    static func list(_ text: String?) -> [String] { (text ?? "").split(separator: " ").map(String.init) }
}
