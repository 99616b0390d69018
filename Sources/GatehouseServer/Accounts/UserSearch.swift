import Foundation
import SQLKit

/// What an operator looks for in the user list (`/console/users`): some text, filters, an order, and where the last
/// page ended. Plain values: the console reads them from its query string, `UserSearch` answers them.
struct UserQuery: Sendable, Equatable {
    /// What the search box held, by what it looks like.
    enum Text: Sendable, Equatable {
        /// A UUID: that account, exactly.
        case id(String)
        /// Any other text: addresses starting with it (emails are stored lower-cased), read from the email
        /// index; a single sign-on account's provider address too.
        case emailPrefix(String)
        /// `metadata:TEXT`: the text anywhere in `user_metadata` or `app_metadata`. The metadata has no index: this
        /// one reads every account, so it is asked for by name rather than tried for every search.
        case metadata(String)
    }

    var text: Text?
    var confirmed: Bool?
    var banned: Bool?
    var anonymous: Bool?
    /// A verified second factor (an authenticator app).
    var hasFactor: Bool?
    /// An identity of this provider (`email`, `apple`, `google`, a custom provider's name).
    var provider: String?
    /// Created at or after `createdFrom`, and before `createdBefore`.
    var createdFrom: Date?
    var createdBefore: Date?
    var sort: UserSort = .newest
    /// The last row of the page before; nil for the first page.
    var after: UserCursor?

    /// What asks for a search of the metadata.
    static let metadataPrefix = "metadata:"

    /// The search box's text, by its shape; nil for an empty box.
    static func text(_ raw: String) -> Text? {
        let trimmed = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { return nil }
        if let id = Secrets.identifier(trimmed) { return .id(id) }
        if trimmed.lowercased().hasPrefix(metadataPrefix) {
            let text = trimmed.dropFirst(metadataPrefix.count).trimmingCharacters(in: .whitespaces)
            return text.isEmpty ? nil : .metadata(text.lowercased())
        }
        return .emailPrefix(trimmed.lowercased())
    }
}

/// The user list's orders. Each is a walk along an index of `accounts` (`created_at, id`, `last_sign_in_at, id`,
/// `email`), so that a page costs the same at a million accounts as at a thousand.
enum UserSort: String, Sendable, CaseIterable {
    case newest
    case oldest
    /// The latest sign-in first; accounts that never signed in come last, newest id first.
    case lastSignIn = "last_sign_in"
    case email
}

/// Where a page of the user list ended: the sort column's value on its last row (nil for an account that never
/// signed in, sorting by sign-in) and that row's id. Sent to the browser as an opaque token, base64url of
/// `value|id`.
struct UserCursor: Sendable, Equatable {
    let value: String?
    let id: String

    init(value: String?, id: String) {
        self.value = value
        self.id = id
    }

    /// The cursor in `token`, if it is one for `sort`: a number for the time orders, an address for `email`.
    init?(token: String, sort: UserSort) {
        guard token.count <= 600, let data = Data(base64URL: token), let text = String(data: data, encoding: .utf8),
            let bar = text.lastIndex(of: "|")
        else { return nil }
        let value = String(text[..<bar])
        let id = String(text[text.index(after: bar)...])
        guard !id.isEmpty, id.count <= 64, !id.contains("|") else { return nil }
        switch sort {
        case .newest, .oldest:
            guard Int64(value) != nil else { return nil }
        case .lastSignIn:
            guard value.isEmpty || Int64(value) != nil else { return nil }
        case .email:
            guard !value.isEmpty else { return nil }
        }
        self.value = value.isEmpty ? nil : value
        self.id = id
    }

    var token: String { Secrets.base64URL(Data("\(value ?? "")|\(id)".utf8)) }

    /// The cursor after `account` in `sort`.
    init(after account: AccountRecord, sort: UserSort) {
        switch sort {
        case .newest, .oldest: value = String(account.createdAt.epochMilliseconds)
        case .lastSignIn: value = account.lastSignInAt.map { String($0.epochMilliseconds) }
        case .email: value = account.email
        }
        id = account.id
    }
}

/// A row of the user list: the account, its identities' providers, and whether it has a verified second factor.
struct ListedUser: Sendable {
    let account: AccountRecord
    let providers: [String]
    let hasFactor: Bool
}

/// The user search the console asks: a page of accounts for a `UserQuery`, with the cursor of the next page while
/// there is one. The interface Accounts exports for it, over `UserSearchRepository`.
struct UserSearch {
    static let pageSize = 50

    private let repository: UserSearchRepository

    init(db: any SQLDatabase) { repository = UserSearchRepository(db: db) }

    func page(_ query: UserQuery, now: Date, size: Int = UserSearch.pageSize) async throws -> (
        users: [ListedUser], next: UserCursor?
    ) {
        let found = try await repository.accounts(query, now: now, limit: size + 1)
        let shown = Array(found.prefix(size))
        let ids = shown.map(\.id)
        let providers = try await repository.providers(accountIDs: ids)
        let withFactor = try await repository.withVerifiedFactor(accountIDs: ids)
        let users = shown.map {
            ListedUser(account: $0, providers: providers[$0.id] ?? [], hasFactor: withFactor.contains($0.id))
        }
        let next = found.count > size ? shown.last.map { UserCursor(after: $0, sort: query.sort) } : nil
        return (users, next)
    }
}
