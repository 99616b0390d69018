import Foundation
import GatehouseAPI
import SQLKit

/// The admin API, in GoTrue's wire format (`/auth/v1/admin/…`, `/auth/v1/invite`), for backends holding a service
/// key: users listed, read, created, changed, banned and deleted; links generated instead of mailed; invitations; the
/// audit trail. Every change is audited with the service key's id (`AdminCaller.event`). Only `Access.admin()` makes
/// the `AdminCaller` each method takes.
struct AdminService: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let settings: AuthSettings
    let trail: AuditTrail
    let sessions: SessionService
    let hasher: PasswordHasher
    let mailer: Mailer
    let mail: AccountMail
    let passwords: PasswordRules
    let users: UserReader
    let deletion: AccountDeletion

    static let userNotFound = APIError(.notFound, code: .userNotFound, message: "User not found")
    static let emailExists = APIError(
        .unprocessableContent, code: .emailExists, message: "A user with this email address has already been registered"
    )

    // MARK: Listing

    /// A page of users, newest first (or oldest, `sort=created_at asc`), with the total and GoTrue's `Link` header.
    func list(
        page rawPage: String?, perPage: String?, filter rawFilter: String?, sort: String?, by admin: AdminCaller
    ) async throws -> (list: Schemas.AdminUserList, total: Int, link: String) {
        let page = try AdminPage(page: rawPage, perPage: perPage)
        let oldestFirst = try AdminPage.oldestFirst(sort)
        let filter = rawFilter.flatMap { $0.isEmpty ? nil : $0 }
        let accounts = AccountRepository(db: store.database)
        let total = try await accounts.count(filter: filter)
        var listed: [Schemas.User] = []
        for account in try await accounts.page(
            offset: page.offset, limit: page.size, oldestFirst: oldestFirst, filter: filter)
        {
            listed.append(try await users.user(account, db: store.database))
        }
        let operators = try await OperatorDirectory(db: store.database).operators(among: listed.map(\.id))
        for index in listed.indices { listed[index].isOperator = operators.contains(listed[index].id) }
        var query: [(String, String)] = [("page", String(page.number))]
        if let perPage, !perPage.isEmpty { query.append(("per_page", perPage)) }
        if let filter { query.append(("filter", filter)) }
        if let sort, !sort.isEmpty { query.append(("sort", sort)) }
        let link = page.linkHeader(path: "/auth/v1/admin/users", query: query, total: total)
        return (.init(users: listed, aud: "authenticated"), total, link)
    }

    /// One user by id (any case of its UUID).
    func user(_ rawID: String) async throws -> Schemas.User {
        let account = try await account(rawID, db: store.database)
        var user = try await users.user(account, db: store.database)
        user.isOperator = try await OperatorDirectory(db: store.database).operators(among: [account.id])
            .contains(account.id)
        return user
    }

    private func account(_ rawID: String, db: any SQLDatabase) async throws -> AccountRecord {
        guard let id = Secrets.identifier(rawID) else {
            throw APIError(.notFound, code: .validationFailed, message: "user_id must be an UUID")
        }
        guard let account = try await AccountRepository(db: db).find(id: id) else { throw Self.userNotFound }
        return account
    }

    // MARK: Creating and changing

    /// Creates a user with an email, as GoTrue's `POST /admin/users` does; no mail is sent.
    func create(_ body: Schemas.AdminUserAttributes, by admin: AdminCaller) async throws -> Schemas.User {
        guard let raw = body.email, !raw.isEmpty else {
            throw APIError.validation("Cannot create a user without an email (Gatehouse has no phone sign-in)")
        }
        let email = try await mail.deliverableEmail(raw)
        let id = try body.id.map { raw -> String in
            guard let id = Secrets.identifier(raw) else {
                throw APIError.validation("ID must conform to the uuid v4 format")
            }
            guard id != Self.nilUUID else { throw APIError.validation("ID cannot be a nil uuid") }
            return id
        }
        let hash = try await passwordHash(password: body.password, hash: body.passwordHash, email: email)
        let ban = try body.banDuration.flatMap(BanDuration.init)
        try UserMetadata.check(body.userMetadata ?? [:])
        try UserMetadata.check(body.appMetadata ?? [:])
        let now = clock.now
        let newID = id ?? Secrets.identifier()
        try await sessions.hooks?.beforeCreatingAccount(
            id: newID, email: email, provider: "email", metadata: body.userMetadata ?? [:],
            confirmed: body.emailConfirm == true, now: now, store: store)
        let created = try await store.transaction { [self] db -> AccountRecord in
            let accounts = AccountRepository(db: db)
            guard try await accounts.find(email: email) == nil else { throw Self.emailExists }
            if let id, try await accounts.find(id: id) != nil {
                throw APIError(
                    .unprocessableContent, code: .userAlreadyExists, message: "A user with this id already exists")
            }
            var account = AccountRecord(
                id: newID, email: email, emailConfirmedAt: body.emailConfirm == true ? now : nil,
                passwordHash: hash, userMetadata: UserMetadata.merged([:], body.userMetadata ?? [:]), createdAt: now,
                updatedAt: now, lastSignInAt: nil, disabledAt: nil,
                appMetadata: UserMetadata.merged([:], body.appMetadata ?? [:]))
            if case .until(let seconds) = ban {
                account.disabledAt = now
                account.bannedUntil = now.addingTimeInterval(seconds)
            }
            try await accounts.insert(account)
            try await accounts.insert(
                IdentityRecord(
                    id: Secrets.identifier(), accountID: account.id, provider: "email", providerID: account.id,
                    email: email, createdAt: now, lastSignInAt: nil))
            try await trail.within(db).record(
                admin.event(
                    .adminUserCreated, accountID: account.id,
                    detail: ["confirmed": String(body.emailConfirm == true), "password": hash == nil ? "none" : "set"]))
            return account
        }
        return try await users.user(created, db: store.database)
    }

    /// Changes a user, as GoTrue's `PUT /admin/users/{id}` does: email at once (no mail), password (every session
    /// ends), confirmation, metadata (merged), ban.
    func update(_ rawID: String, _ body: Schemas.AdminUserAttributes, by admin: AdminCaller) async throws
        -> Schemas.User
    {
        let current = try await account(rawID, db: store.database)
        if current.isSSOUser, body.email != nil || body.password != nil || body.passwordHash != nil {
            throw APIError(
                .unprocessableContent, code: .userSsoManaged,
                message: "Updating email address or password is not allowed for SSO users")
        }
        let email = try await body.email.flatMap { $0.isEmpty ? nil : $0 }.asyncMap {
            try await mail.deliverableEmail($0)
        }
        let hash = try await passwordHash(
            password: body.password, hash: body.passwordHash, email: email ?? current.email)
        let ban = try body.banDuration.flatMap(BanDuration.init)
        let now = clock.now
        let updated = try await store.transaction { [self] db -> AccountRecord in
            let accounts = AccountRepository(db: db)
            guard var account = try await accounts.findLocked(id: current.id) else { throw Self.userNotFound }
            var changed: [String] = []
            if let email, email != account.email {
                guard try await accounts.find(email: email) == nil else { throw Self.emailExists }
                account.email = email
                account.emailChange = nil
                if account.isAnonymous {
                    // Made permanent by the admin: the address becomes its first identity.
                    account.isAnonymous = false
                    try await accounts.insert(
                        IdentityRecord(
                            id: Secrets.identifier(), accountID: account.id, provider: "email",
                            providerID: account.id, email: email, createdAt: now, lastSignInAt: nil))
                } else {
                    try await accounts.updateEmailIdentity(accountID: account.id, email: email)
                }
                try await OneTimeCodeRepository(db: db).voidEmailChanges(accountID: account.id, at: now)
                changed.append("email")
            }
            if body.emailConfirm == true, account.emailConfirmedAt == nil {
                account.emailConfirmedAt = now
                changed.append("email_confirmed")
            }
            var endSessions = false
            if let hash {
                account.passwordHash = hash
                endSessions = true
                changed.append("password")
            }
            if let data = body.userMetadata {
                account.userMetadata = UserMetadata.merged(account.userMetadata, data)
                try UserMetadata.check(account.userMetadata)
                changed.append("user_metadata")
            }
            if let data = body.appMetadata {
                account.appMetadata = UserMetadata.merged(account.appMetadata, data)
                try UserMetadata.check(account.appMetadata)
                changed.append("app_metadata")
            }
            if let ban {
                let applied = ban.apply(to: &account, now: now)
                if case .until = ban { endSessions = true }
                changed.append(!applied ? "still_disabled" : ban == .lifted ? "unbanned" : "banned")
            }
            account.updatedAt = now
            try await accounts.update(account)
            if endSessions {
                _ = try await sessions.revoke(accountID: account.id, current: "", scope: .global, db: db)
            }
            try await trail.within(db).record(
                admin.event(
                    .adminUserUpdated, accountID: account.id, detail: ["changed": changed.joined(separator: ",")]))
            return account
        }
        return try await users.user(updated, db: store.database)
    }

    /// Deletes a user as the account itself would (`AccountDeletion.erase`); soft or hard alike, since the deletion
    /// already keeps nothing personal.
    func delete(_ rawID: String, by admin: AdminCaller) async throws {
        let account = try await account(rawID, db: store.database)
        try await deletion.erase(
            account, client: admin.client, refusal: .accountDeletionRefused, tombstone: ["service_key": admin.keyID])
    }

    /// The stored hash for a user's new `password` (checked like any password) or imported `hash`; nil for neither.
    private func passwordHash(password: String?, hash: String?, email: String) async throws -> String? {
        switch (password, hash) {
        case (let password?, nil):
            try passwords.checkPassword(password, email: email)
            return try await hasher.hash(password)
        case (nil, let hash?):
            // Bounded as an import is: every later sign-in would pay for an over-costly hash, on a shared pool.
            switch PasswordHasher.importRefusal(of: hash) {
            case nil: return hash
            case .unrecognised?:
                throw APIError.validation(
                    "password_hash must be a bcrypt, argon2i/argon2id (PHC), Firebase scrypt ($fbscrypt$) or yescrypt hash"
                )
            case let refusal?: throw APIError.validation("password_hash is \(refusal)")
            }
        case (nil, nil): return nil
        case (.some, .some): throw APIError.validation("Only a password or a password hash should be provided")
        }
    }

    static let nilUUID = "00000000-0000-0000-0000-000000000000"

    // MARK: Links and invitations

    /// A link and code of `type`, returned instead of mailed (GoTrue's `POST /admin/generate_link`).
    func generateLink(_ body: Schemas.GenerateLinkRequest, redirectTo: String?, by admin: AdminCaller) async throws
        -> Schemas.GenerateLinkResponse
    {
        let email = try await mail.deliverableEmail(body.email)
        let target = body.redirectTo ?? redirectTo
        let requested = body._type.rawValue
        var changeTo: String?
        if body._type == .emailChangeCurrent || body._type == .emailChangeNew {
            guard let raw = body.newEmail, !raw.isEmpty else {
                throw APIError.validation("new_email is required for \(requested)")
            }
            changeTo = try await mail.deliverableEmail(raw)
            if body._type == .emailChangeCurrent, !settings.secureEmailChange {
                throw APIError.validation("Enable secure email change to generate link for current email")
            }
        }
        let newEmail = changeTo
        try UserMetadata.check(body.data ?? [:])
        let pendingHash = try await body.password.asyncMap { password -> String in
            try passwords.checkPassword(password, email: email)
            return try await hasher.hash(password)
        }
        let now = clock.now
        let newAccountID = Secrets.identifier()
        if [.signup, .invite, .magiclink].contains(body._type) {
            try await sessions.hooks?.beforeCreatingAccount(
                id: newAccountID, email: email, provider: "email", metadata: body.data ?? [:], now: now, store: store)
        }
        let (account, code, type) = try await store.transaction {
            [self] db -> (AccountRecord, IssuedCode, String) in
            let accounts = AccountRepository(db: db)
            let codes = OneTimeCodes(db: db, clock: clock, settings: settings)
            let existing = try await accounts.find(email: email)
            var type = requested
            let purpose: CodePurpose
            var recipient = email
            var account: AccountRecord
            var pending: PendingSignup?
            switch body._type {
            case .signup, .invite, .magiclink:
                if let existing, existing.emailConfirmedAt != nil {
                    guard body._type == .magiclink else { throw Self.emailExists }
                    account = existing
                    purpose = .magiclink
                } else {
                    // An address with no confirmed account gets a sign-up (GoTrue turns a magic link into one).
                    if let existing {
                        account = existing
                    } else {
                        // The admin is trusted with the profile (GoTrue sets it at once); the password still waits
                        // for the code, so whoever holds the address chooses whether it counts.
                        account = try await accounts.create(
                            email: email, passwordHash: nil, metadata: body.data ?? [:], confirmedAt: nil, now: now,
                            id: newAccountID)
                    }
                    purpose = .signup
                    pending = PendingSignup(passwordHash: pendingHash, metadata: body.data ?? [:])
                    if body._type == .magiclink { type = "signup" }
                }
            case .recovery:
                guard let existing else {
                    throw APIError(.notFound, code: .userNotFound, message: "User with this email not found")
                }
                account = existing
                purpose = .recovery
            case .emailChangeCurrent, .emailChangeNew:
                guard let found = existing, var locked = try await accounts.findLocked(id: found.id) else {
                    throw APIError(.notFound, code: .userNotFound, message: "User with this email not found")
                }
                guard let newEmail else { throw APIError.validation("new_email is required") }
                if try await accounts.find(email: newEmail) != nil { throw Self.emailExists }
                if locked.emailChange?.newEmail != newEmail {
                    locked.emailChange = PendingEmailChange(newEmail: newEmail, sentAt: now)
                    try await accounts.update(locked)
                    try await OneTimeCodeRepository(db: db).voidEmailChanges(accountID: locked.id, at: now)
                }
                account = locked
                purpose = .emailChange
                if body._type == .emailChangeNew { recipient = newEmail }
            }
            let code = try await codes.issue(
                email: recipient, purpose: purpose, accountID: account.id, newEmail: newEmail, pending: pending,
                keys: mail.codeKeys)
            if body._type == .invite {
                try await accounts.stamp(.invited, accountID: account.id, at: now)
            }
            try await trail.within(db).record(
                admin.event(.adminLinkGenerated, accountID: account.id, detail: ["type": type]))
            return (try await accounts.find(id: account.id) ?? account, code, type)
        }
        let linkType = purpose(ofLinkType: type)
        let user = try await users.user(account, db: store.database)
        return .init(
            value1: user,
            value2: .init(
                actionLink: mail.verifyLink(token: code.linkToken, type: linkType, redirectTo: target),
                emailOtp: code.code, hashedToken: code.linkToken, verificationType: type,
                redirectTo: mail.redirectTarget(target)))
    }

    /// The `type` a generated link carries to `GET /auth/v1/verify`.
    private func purpose(ofLinkType type: String) -> String {
        switch type {
        case "email_change_current", "email_change_new": "email_change"
        default: type
        }
    }

    /// Invites an address (GoTrue's `POST /invite`): an unconfirmed user with `data` as its profile, and a mailed link
    /// whose use confirms the address and signs in.
    func invite(_ body: Schemas.InviteRequest, redirectTo: String?, by admin: AdminCaller) async throws
        -> Schemas.User
    {
        let email = try await mail.deliverableEmail(body.email)
        try UserMetadata.check(body.data ?? [:])
        let now = clock.now
        let newAccountID = Secrets.identifier()
        try await sessions.hooks?.beforeCreatingAccount(
            id: newAccountID, email: email, provider: "email", metadata: body.data ?? [:], now: now, store: store)
        let account = try await mail.transactionQueuingMail { [self] db -> AccountRecord in
            let accounts = AccountRepository(db: db)
            let existing = try await accounts.find(email: email)
            if let existing, existing.emailConfirmedAt != nil { throw Self.emailExists }
            var account: AccountRecord
            if let existing {
                account = existing
            } else {
                // The invitation's profile is the user's at once, as GoTrue sets it.
                account = try await accounts.create(
                    email: email, passwordHash: nil, metadata: body.data ?? [:], confirmedAt: nil, now: now,
                    id: newAccountID)
            }
            try await AccountRepository(db: db).stamp(.invited, accountID: account.id, at: now)
            try await mail.issueAndMail(
                to: email, purpose: .signup, accountID: account.id,
                pending: PendingSignup(passwordHash: nil, metadata: body.data ?? [:]), db: db
            ) { code in
                .invite(
                    code: code.code,
                    link: mail.verifyLink(token: code.linkToken, type: "invite", redirectTo: redirectTo))
            }
            try await trail.within(db).record(
                admin.event(.adminUserInvited, accountID: account.id))
            return try await accounts.find(id: account.id) ?? account
        }
        return try await users.user(account, db: store.database)
    }

    // MARK: The audit trail

    /// A page of the trail in GoTrue's entry shape, newest first; `query` is `action:<name>` or `author:<user id>`.
    func audit(page rawPage: String?, perPage: String?, query: String?, by admin: AdminCaller) async throws -> (
        entries: [Schemas.AdminAuditEntry], total: Int, link: String
    ) {
        let page = try AdminPage(page: rawPage, perPage: perPage)
        var action: String?
        var author: String?
        if let query, !query.isEmpty {
            let parts = query.split(separator: ":", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw APIError.validation("Invalid query scope: \(query)") }
            switch parts[0] {
            case "action": action = parts[1]
            case "author": author = parts[1].lowercased()
            default: throw APIError.validation("Invalid query scope: \(query)")
            }
        }
        let (records, total) = try await trail.all(
            offset: page.offset, limit: page.size, action: action, accountID: author)
        let entries = records.map { accountID, record in
            var payload: [String: JSONValue] = [
                "action": .string(record.action), "log_type": .string(AdminPage.logType(record.action)),
                "actor_id": .string(accountID ?? Self.nilUUID),
                "actor_username": .string(record.detail["service_key"] != nil ? ServiceKeys.role : accountID ?? ""),
            ]
            if !record.detail.isEmpty { payload["traits"] = .object(record.detail.mapValues(JSONValue.string)) }
            if let companyID = record.companyID { payload["company_id"] = .string(companyID) }
            return Schemas.AdminAuditEntry(
                id: String(record.id), payload: payload, createdAt: record.occurredAt, ipAddress: record.ip ?? "")
        }
        var linkQuery: [(String, String)] = [("page", String(page.number))]
        if let perPage, !perPage.isEmpty { linkQuery.append(("per_page", perPage)) }
        if let query, !query.isEmpty { linkQuery.append(("query", query)) }
        return (entries, total, page.linkHeader(path: "/auth/v1/admin/audit", query: linkQuery, total: total))
    }
}

/// A page of an admin listing, as GoTrue reads `page` and `per_page` (an empty value is the default).
struct AdminPage: Equatable {
    let number: Int
    let size: Int

    static let defaultSize = 50
    static let maximumSize = 1000

    init(number: Int, size: Int) {
        self.number = number
        self.size = size
    }

    init(page: String?, perPage: String?) throws {
        func parse(_ raw: String?, _ name: String, default value: Int, range: ClosedRange<Int>) throws -> Int {
            guard let raw, !raw.isEmpty else { return value }
            guard let number = Int(raw), range.contains(number) else {
                throw APIError.validation(
                    "Bad Pagination Parameters: \(name) must be a whole number from \(range.lowerBound) to \(range.upperBound)"
                )
            }
            return number
        }
        number = try parse(page, "page", default: 1, range: 1...1_000_000)
        size = try parse(perPage, "per_page", default: Self.defaultSize, range: 1...Self.maximumSize)
    }

    var offset: Int { (number - 1) * size }

    /// Whether `sort` (GoTrue's `created_at asc|desc`, default desc) asks for the oldest first.
    static func oldestFirst(_ sort: String?) throws -> Bool {
        guard let sort, !sort.isEmpty else { return false }
        let parts = sort.split(separator: " ").map { $0.lowercased() }
        guard parts.first == "created_at" else {
            throw APIError.validation("Bad Sort Parameters: bad field for sort '\(parts.first ?? "")'")
        }
        switch parts.count == 1 ? "desc" : parts[1] {
        case "asc": return true
        case "desc": return false
        default: throw APIError.validation("Bad Sort Parameters: bad direction for sort '\(parts[1])'")
        }
    }

    /// GoTrue's `Link` header: the next page while there is one, and always the last (page 0 when nothing matches),
    /// each with the request's own query, keys sorted as Go's `url.Values.Encode` sorts them.
    func linkHeader(path: String, query: [(String, String)], total: Int) -> String {
        let pages = (total + size - 1) / size
        func link(_ page: Int, _ rel: String) -> String {
            var components = URLComponents()
            components.path = path
            components.queryItems = query.map { $0.0 == "page" ? ($0.0, String(page)) : $0 }
                .sorted { $0.0 < $1.0 }.map { URLQueryItem(name: $0.0, value: $0.1) }
            return "<\(components.string ?? path)>; rel=\"\(rel)\""
        }
        let last = link(pages, "last")
        return pages > number ? link(number + 1, "next") + ", " + last : last
    }

    /// GoTrue's `log_type` for an action: what kind of thing it was about.
    static func logType(_ action: String) -> String {
        if action.hasPrefix("token_") || action.hasPrefix("refresh_") { return "token" }
        if action.hasPrefix("admin_") || action == "signup" || action == "account_deleted" { return "team" }
        if action.hasPrefix("signed_in") || action.hasPrefix("sign_in") || action.hasPrefix("signed_out") {
            return "account"
        }
        if action.hasPrefix("company_") || action.hasPrefix("share_") || action.hasPrefix("member") {
            return "company"
        }
        return "user"
    }
}

/// GoTrue's `ban_duration`: `none` lifts a ban, a Go duration (`24h`, `1h30m`, `90s`) bans for that long.
enum BanDuration: Equatable {
    case lifted
    case until(TimeInterval)

    /// Bans or lifts at `now`; false when the account is disabled without an end (`gatehouse users disable`, or
    /// imported so) and stays so: that is not a ban, and no ban lifts or shortens it; only `gatehouse users enable`
    /// does (issue 35, finding 4).
    func apply(to account: inout AccountRecord, now: Date) -> Bool {
        guard account.disabledAt == nil || account.bannedUntil != nil else { return false }
        switch self {
        case .lifted:
            account.disabledAt = nil
            account.bannedUntil = nil
        case .until(let seconds):
            account.disabledAt = now
            account.bannedUntil = now.addingTimeInterval(seconds)
        }
        return true
    }

    init?(_ raw: String) throws {
        if raw.isEmpty { return nil }
        if raw == "none" {
            self = .lifted
            return
        }
        // At most a century (Go's durations stop near 292 years): a longer one is what a ban without an end is for.
        guard let seconds = Self.seconds(raw), seconds.isFinite, seconds > 0, seconds <= 100 * 365 * 86_400 else {
            throw APIError.validation(
                "invalid format for ban duration: '\(raw)' (none, or a duration such as 24h or 1h30m)")
        }
        self = .until(seconds)
    }

    /// Seconds in a Go duration string (units ns, us, µs, ms, s, m, h; decimals allowed), or nil.
    static func seconds(_ text: String) -> TimeInterval? {
        let units: [(String, Double)] = [
            ("ns", 1e-9), ("us", 1e-6), ("µs", 1e-6), ("ms", 1e-3), ("s", 1), ("m", 60), ("h", 3600),
        ]
        var rest = Substring(text)
        var total = 0.0
        guard !rest.isEmpty else { return nil }
        while !rest.isEmpty {
            let number = rest.prefix { $0.isNumber || $0 == "." }
            guard !number.isEmpty, let value = Double(number) else { return nil }
            rest = rest.dropFirst(number.count)
            guard let (unit, scale) = units.filter({ rest.hasPrefix($0.0) }).max(by: { $0.0.count < $1.0.count })
            else { return nil }
            rest = rest.dropFirst(unit.count)
            total += value * scale
        }
        return total
    }
}

extension Optional {
    /// `map` with an async transform.
    fileprivate func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let self else { return nil }
        return try await transform(self)
    }
}
