import Crypto
import Foundation
import GatehouseAPI

/// A user read from another service's export, ready to import: the id it keeps, its address, hash, times, metadata
/// and identities, and the line of the export it came from (for the report).
public struct ImportedUser: Sendable, Equatable {
    public let line: Int
    public var id: String
    public var email: String
    public var passwordHash: String?
    public var emailConfirmedAt: Date?
    public var createdAt: Date
    public var updatedAt: Date
    public var lastSignInAt: Date?
    public var userMetadata: [String: JSONValue] = [:]
    public var appMetadata: [String: JSONValue] = [:]
    /// Apple and Google identities linked to the account, by the provider's `sub`.
    public var identities: [ImportedIdentity] = []
    public var disabled = false
    /// When a ban of a set length ends (the sweeper lifts it then).
    public var bannedUntil: Date? = nil
}

/// A provider's identity an imported account keeps: `apple` or `google`, and the provider's subject.
public struct ImportedIdentity: Sendable, Equatable {
    public var provider: String
    public var subject: String

    public init(provider: String, subject: String) {
        self.provider = provider
        self.subject = subject
    }

    /// The providers whose identities sign in here (by id token), under their names in Gatehouse.
    static let kept = ["apple": "apple", "google": "google", "apple.com": "apple", "google.com": "google"]
}

/// Why a row of an export cannot be imported, by line (1 is the first line of the file; a JSON array's rows count
/// from 1 too), or a note about what was left out of an imported row.
public struct ImportNote: Sendable, Equatable, CustomStringConvertible {
    public let line: Int
    public let reason: String

    public var description: String { "line \(line): \(reason)" }
}

/// What an export held: the users to import, the rows refused, and notes on what was left out.
public struct ImportRead: Sendable {
    public var users: [ImportedUser] = []
    public var problems: [ImportNote] = []
    public var notes: [ImportNote] = []
}

/// Firebase's project-wide password hash parameters (Authentication → Users → Password hash parameters).
public struct FirebaseHashParameters: Sendable, Equatable {
    public let signerKey: Data
    public let saltSeparator: Data
    public let rounds: Int
    public let memoryCost: Int

    public init?(signerKey: String, saltSeparator: String, rounds: Int, memoryCost: Int) {
        guard let key = Data(base64Encoded: signerKey), !key.isEmpty, let separator = Data(base64Encoded: saltSeparator)
        else { return nil }
        self.signerKey = key
        self.saltSeparator = separator
        self.rounds = rounds
        self.memoryCost = memoryCost
    }
}

/// The exports Gatehouse reads (`gatehouse users import`). Pure: bytes in, users and problems out.
public enum ImportFormats {
    // MARK: Supabase

    /// `auth.users` (and optionally `auth.identities`) as Supabase's PostgreSQL exports them: `COPY … TO STDOUT WITH
    /// CSV HEADER`, or JSON (an array of rows, as `json_agg` gives, or `{"users": [...]}`). Ids, confirmation and
    /// sign-in times, metadata and bcrypt (or argon2) hashes are kept; email, Apple and Google identities are linked.
    public static func supabase(users: Data, identities: Data?) -> ImportRead {
        var read = ImportRead()
        var linked: [String: [ImportedIdentity]] = [:]
        if let identities {
            let (rows, problems) = rows(of: identities)
            read.problems += problems
            for (line, row) in rows {
                guard let userID = row["user_id"]?.text.flatMap(Secrets.identifier) else {
                    read.problems.append(.init(line: line, reason: "identities: user_id is not a UUID"))
                    continue
                }
                let provider = row["provider"]?.text ?? ""
                switch provider {
                case "email": continue  // the account's own address is its email identity
                case let kept where ImportedIdentity.kept[kept] != nil:
                    let data = object(row["identity_data"])
                    guard let subject = row["provider_id"]?.text ?? data["sub"]?.text ?? row["id"]?.text else {
                        read.problems.append(
                            .init(line: line, reason: "identities: an \(provider) identity without provider_id"))
                        continue
                    }
                    linked[userID, default: []].append(
                        ImportedIdentity(provider: ImportedIdentity.kept[kept] ?? kept, subject: subject))
                default:
                    read.notes.append(
                        .init(
                            line: line,
                            reason:
                                "identities: \(provider) sign-in is not kept "
                                + "(Gatehouse signs in by email, Apple and Google)"))
                }
            }
        }
        let (rows, problems) = rows(of: users)
        read.problems += problems
        for (line, row) in rows {
            if row["deleted_at"]?.text != nil {
                read.notes.append(.init(line: line, reason: "deleted in Supabase: not imported"))
                continue
            }
            guard let id = row["id"]?.text.flatMap(Secrets.identifier) else {
                read.problems.append(.init(line: line, reason: "id is not a UUID"))
                continue
            }
            guard let raw = row["email"]?.text, !raw.isEmpty else {
                let anonymous = row["is_anonymous"]?.bool == true
                read.problems.append(
                    .init(
                        line: line,
                        reason: anonymous
                            ? "an anonymous user (no email) cannot be imported"
                            : "no email (phone users are not supported)"))
                continue
            }
            guard let email = EmailAddress.normalize(raw) else {
                read.problems.append(.init(line: line, reason: "email is not an address"))
                continue
            }
            var hash = row["encrypted_password"]?.text
            if hash?.isEmpty == true { hash = nil }
            if let given = hash, let refusal = PasswordHasher.importRefusal(of: given) {
                read.problems.append(
                    .init(
                        line: line,
                        reason: refusal == .unrecognised
                            ? "encrypted_password is not a bcrypt, argon2 or Firebase scrypt hash"
                            : "encrypted_password is \(refusal)"))
                continue
            }
            let created = row["created_at"]?.text.flatMap(timestamp)
            guard let createdAt = created else {
                read.problems.append(.init(line: line, reason: "created_at is not a timestamp"))
                continue
            }
            var user = ImportedUser(
                line: line, id: id, email: email, passwordHash: hash,
                emailConfirmedAt: (row["email_confirmed_at"] ?? row["confirmed_at"])?.text.flatMap(timestamp),
                createdAt: createdAt, updatedAt: row["updated_at"]?.text.flatMap(timestamp) ?? createdAt,
                lastSignInAt: row["last_sign_in_at"]?.text.flatMap(timestamp))
            guard let userMetadata = strictObject(row["raw_user_meta_data"]),
                let appMetadata = strictObject(row["raw_app_meta_data"])
            else {
                read.problems.append(
                    .init(line: line, reason: "raw_user_meta_data or raw_app_meta_data is not a JSON object"))
                continue
            }
            user.userMetadata = userMetadata
            user.appMetadata = appMetadata.filter { $0.key != "provider" && $0.key != "providers" }
            user.identities = linked[id] ?? []
            if let until = row["banned_until"]?.text.flatMap(timestamp), until > Date() {
                user.disabled = true
                // Supabase's ban for ever is a date a century away: only a shorter one ends by itself.
                if until < Date().addingTimeInterval(50 * 365 * 86_400) { user.bannedUntil = until }
            }
            read.users.append(user)
        }
        read.problems.sort { $0.line < $1.line }
        return read
    }

    // MARK: Firebase

    /// `firebase auth:export users.json --format=json`, with the project's hash parameters. Firebase's ids are not
    /// UUIDs: each user gets a UUID derived from its `localId` (the same on every run) and keeps the `localId` as
    /// `app_metadata.firebase_uid`; custom claims go to `app_metadata`, the display name and photo to
    /// `user_metadata` (`full_name`, `avatar_url`, as Supabase keeps them).
    public static func firebase(_ data: Data, parameters: FirebaseHashParameters?) -> ImportRead {
        var read = ImportRead()
        guard let top = try? JSONDecoder().decode(JSONValue.self, from: data), case .object(let root) = top,
            case .array(let users)? = root["users"]
        else {
            read.problems.append(.init(line: 1, reason: "not a Firebase export: expected {\"users\": [...]}"))
            return read
        }
        for (index, value) in users.enumerated() {
            let line = index + 1
            guard case .object(let row) = value else {
                read.problems.append(.init(line: line, reason: "a user is not an object"))
                continue
            }
            guard let localID = row["localId"]?.text, !localID.isEmpty else {
                read.problems.append(.init(line: line, reason: "no localId"))
                continue
            }
            guard let raw = row["email"]?.text, let email = EmailAddress.normalize(raw) else {
                read.problems.append(.init(line: line, reason: "no email (phone users are not supported)"))
                continue
            }
            var hash: String?
            if let passwordHash = row["passwordHash"]?.text, !passwordHash.isEmpty {
                guard let parameters else {
                    read.problems.append(
                        .init(
                            line: line,
                            reason: "has a password hash: give the project's --hash-key and --salt-separator"))
                    continue
                }
                guard let hashBytes = Data(base64Encoded: passwordHash),
                    let salt = row["salt"]?.text.flatMap({ Data(base64Encoded: $0) }), !salt.isEmpty
                else {
                    read.problems.append(.init(line: line, reason: "passwordHash or salt is not base64"))
                    continue
                }
                let stored = FirebaseScryptHash(
                    logN: parameters.memoryCost, rounds: parameters.rounds, parallelism: 1,
                    saltSeparator: parameters.saltSeparator, signerKey: parameters.signerKey, salt: salt,
                    hash: hashBytes)
                guard stored.isWithinLimits else {
                    read.problems.append(
                        .init(
                            line: line,
                            reason: "the hash does not fit the project's parameters (its length, rounds or memory cost)"
                        ))
                    continue
                }
                if let refusal = PasswordHasher.importRefusal(of: stored.encoded) {
                    read.problems.append(.init(line: line, reason: "passwordHash is \(refusal)"))
                    continue
                }
                hash = stored.encoded
            }
            // Milliseconds since 1970, as Firebase writes them; anything else (or before 1970, after 2200) is refused.
            let millis = { (key: String) -> Date?? in
                guard let text = row[key]?.text else { return .some(nil) }
                guard let value = Double(text), value.isFinite, (0...7_258_118_400_000).contains(value) else {
                    return nil
                }
                return .some(Date(timeIntervalSince1970: value / 1000))
            }
            guard let created = millis("createdAt"), let lastSignedIn = millis("lastSignedInAt") else {
                read.problems.append(.init(line: line, reason: "createdAt or lastSignedInAt is not milliseconds"))
                continue
            }
            let createdAt = created ?? Date(timeIntervalSince1970: 0)
            var user = ImportedUser(
                line: line, id: derivedUUID("firebase:" + localID), email: email, passwordHash: hash,
                emailConfirmedAt: row["emailVerified"]?.bool == true ? createdAt : nil, createdAt: createdAt,
                updatedAt: createdAt, lastSignInAt: lastSignedIn)
            if let name = row["displayName"]?.text { user.userMetadata["full_name"] = .string(name) }
            if let photo = row["photoUrl"]?.text { user.userMetadata["avatar_url"] = .string(photo) }
            if let claims = row["customAttributes"]?.text {
                guard case .object(let custom)? = try? JSONDecoder().decode(JSONValue.self, from: Data(claims.utf8))
                else {
                    read.problems.append(.init(line: line, reason: "customAttributes is not a JSON object"))
                    continue
                }
                user.appMetadata = custom
            }
            user.appMetadata["firebase_uid"] = .string(localID)
            if case .array(let providers)? = row["providerUserInfo"] {
                for case .object(let provider) in providers {
                    switch provider["providerId"]?.text {
                    case let kept? where ImportedIdentity.kept[kept] != nil:
                        if let subject = provider["rawId"]?.text {
                            user.identities.append(
                                ImportedIdentity(provider: ImportedIdentity.kept[kept] ?? kept, subject: subject))
                        }
                    case "password", nil: break
                    case let other?:
                        read.notes.append(
                            .init(
                                line: line,
                                reason: "\(other) sign-in is not kept (Gatehouse signs in by email, Apple and Google)"))
                    }
                }
            }
            user.disabled = row["disabled"]?.bool == true
            read.users.append(user)
        }
        return read
    }

    // MARK: Rows

    /// The rows of a CSV file with a header (PostgreSQL's `COPY … WITH CSV HEADER`: an empty unquoted field is NULL)
    /// or of JSON, each with its line. JSON text in a CSV field stays text (`object` parses it).
    static func rows(of data: Data) -> (rows: [(line: Int, row: [String: JSONValue])], problems: [ImportNote]) {
        let text = String(decoding: data, as: UTF8.self)
        let trimmed = text.drop { $0.isWhitespace }
        if trimmed.hasPrefix("[") || trimmed.hasPrefix("{") {
            guard let value = try? JSONDecoder().decode(JSONValue.self, from: data) else {
                return ([], [.init(line: 1, reason: "the file is not valid JSON")])
            }
            var list: [JSONValue] = []
            switch value {
            case .array(let items): list = items
            case .object(let object):
                if case .array(let items)? = object["users"] ?? object["identities"] {
                    list = items
                } else {
                    list = [value]
                }
            default: return ([], [.init(line: 1, reason: "the JSON holds no rows")])
            }
            var rows: [(Int, [String: JSONValue])] = []
            var problems: [ImportNote] = []
            for (index, item) in list.enumerated() {
                if case .object(let object) = item {
                    rows.append((index + 1, object))
                } else {
                    problems.append(.init(line: index + 1, reason: "a row is not an object"))
                }
            }
            return (rows, problems)
        }
        let records = CSV.records(text)
        guard let header = records.first?.fields.map({ $0 ?? "" }) else {
            return ([], [.init(line: 1, reason: "the file is empty")])
        }
        var rows: [(Int, [String: JSONValue])] = []
        var problems: [ImportNote] = []
        for record in records.dropFirst() {
            guard record.fields.count == header.count else {
                problems.append(
                    .init(
                        line: record.line, reason: "\(record.fields.count) fields where the header has \(header.count)")
                )
                continue
            }
            var row: [String: JSONValue] = [:]
            for (name, field) in zip(header, record.fields) { row[name] = field.map(JSONValue.string) ?? .null }
            rows.append((record.line, row))
        }
        return (rows, problems)
    }

    /// A JSON object from a column: an object already, or JSON text (CSV); anything else is empty.
    static func object(_ value: JSONValue?) -> [String: JSONValue] { strictObject(value) ?? [:] }

    /// A metadata column: absent or NULL is empty; anything but an object (or its JSON text) is nil.
    static func strictObject(_ value: JSONValue?) -> [String: JSONValue]? {
        switch value {
        case nil, .null?: return [:]
        case .object(let object)?: return object
        case .string(let text)?:
            if text.isEmpty { return [:] }
            guard case .object(let object)? = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) else {
                return nil
            }
            return object
        default: return nil
        }
    }

    /// A name-based UUID (version 5 layout, SHA-1) for an id that is not one.
    static func derivedUUID(_ name: String) -> String {
        var bytes = Array(Insecure.SHA1.hash(data: Data(name.utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x50
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = bytes.map { String(format: "%02x", $0) }.joined()
        let parts = [
            hex.prefix(8), hex.dropFirst(8).prefix(4), hex.dropFirst(12).prefix(4), hex.dropFirst(16).prefix(4),
            hex.dropFirst(20),
        ]
        return parts.joined(separator: "-")
    }

    /// A timestamp as PostgreSQL writes one (`2024-01-02 03:04:05.123456+00`) or as ISO 8601.
    static func timestamp(_ text: String) -> Date? {
        var value = text.trimmingCharacters(in: .whitespaces)
        guard !value.isEmpty else { return nil }
        if value.count > 10, value[value.index(value.startIndex, offsetBy: 10)] == " " {
            value.replaceSubrange(
                value.index(value.startIndex, offsetBy: 10)...value.index(value.startIndex, offsetBy: 10), with: "T")
        }
        // A zone of hours alone (+00, -05) gets its minutes.
        if let match = value.firstMatch(of: /([+-]\d\d)$/) { value = String(value.dropLast(3)) + match.1 + ":00" }
        if !value.hasSuffix("Z"), value.firstMatch(of: /[+-]\d\d:\d\d$/) == nil { value += "Z" }
        // Microseconds are more digits than the formatter takes: keep milliseconds.
        if let match = value.firstMatch(of: /\.(\d+)/), match.1.count > 3 {
            value.replaceSubrange(match.range, with: "." + match.1.prefix(3))
        }
        let fractional = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        return (try? Date(value, strategy: fractional)) ?? (try? Date(value, strategy: .iso8601))
    }
}

/// RFC 4180 CSV, as PostgreSQL's `COPY … CSV` writes it: quoted fields may hold commas, quotes (doubled) and line
/// breaks; an empty unquoted field is NULL (nil), an empty quoted one the empty string.
enum CSV {
    struct Record: Equatable {
        let line: Int
        let fields: [String?]
    }

    static func records(_ text: String) -> [Record] {
        var records: [Record] = []
        var fields: [String?] = []
        var field = ""
        var quoted = false
        var wasQuoted = false
        var line = 1
        var recordLine = 1
        var characters = text.makeIterator()
        var pending: Character? = nil
        func next() -> Character? {
            if let character = pending {
                pending = nil
                return character
            }
            return characters.next()
        }
        func endField() {
            fields.append(field.isEmpty && !wasQuoted ? nil : field)
            field = ""
            wasQuoted = false
        }
        while let character = next() {
            if quoted {
                if character == "\"" {
                    if let following = next() {
                        if following == "\"" { field.append("\"") } else { quoted = false; pending = following }
                    } else {
                        quoted = false
                    }
                } else {
                    if character == "\n" || character == "\r\n" { line += 1 }
                    field.append(character)
                }
                continue
            }
            switch character {
            case "\"": quoted = true; wasQuoted = true
            case ",": endField()
            case "\n", "\r\n", "\r":
                endField()
                if !(fields.count == 1 && fields[0] == nil) { records.append(Record(line: recordLine, fields: fields)) }
                fields = []
                line += 1
                recordLine = line
            default: field.append(character)
            }
        }
        if !field.isEmpty || wasQuoted || !fields.isEmpty {
            endField()
            records.append(Record(line: recordLine, fields: fields))
        }
        return records
    }
}

extension JSONValue {
    /// The value as text: a string, or a number or boolean written out (CSV and JSON exports differ).
    var text: String? {
        switch self {
        case .string(let text): text
        case .int(let number): String(number)
        case .double(let number): String(number)
        case .bool(let flag): String(flag)
        default: nil
        }
    }

    /// The value as a boolean: `true`, or CSV's `t`/`true`.
    var bool: Bool? {
        switch self {
        case .bool(let flag): flag
        case .string(let text):
            ["t", "true"].contains(text.lowercased()) ? true : ["f", "false"].contains(text.lowercased()) ? false : nil
        default: nil
        }
    }
}
