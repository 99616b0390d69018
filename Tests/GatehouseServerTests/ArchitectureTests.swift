import Foundation
import Testing

/// The shape of the code, read from the sources (issue 36, item 4): a feature's SQL is its own. A repository is used
/// from its own folder and from `Storage/`; another feature asks through the small interface the owner exports
/// (`AccountDirectory`, `SessionChanges`, `CompanyDirectory`, `AuditTrail`, …). Lower layers do not use features'
/// types, but for today's few, listed so that none is added unseen and each one removed comes off the list.
@Suite("Architecture: who may use whom")
struct ArchitectureTests {
    /// `Sources/GatehouseServer`, found from this file.
    static let server = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources/GatehouseServer")

    /// Each Swift file under `Sources/GatehouseServer`, by its path below it, with its text less its line comments.
    static func sources() throws -> [(path: String, text: String)] {
        let enumerator = FileManager.default.enumerator(at: server, includingPropertiesForKeys: nil)
        var files: [(String, String)] = []
        while let url = enumerator?.nextObject() as? URL {
            guard url.pathExtension == "swift" else { continue }
            let path = String(url.path.dropFirst(server.path.count + 1))
            let text = try String(contentsOf: url, encoding: .utf8).split(
                separator: "\n", omittingEmptySubsequences: false
            )
            .map { line in line.range(of: "//").map { String(line[..<$0.lowerBound]) } ?? String(line) }
            .joined(separator: "\n")
            files.append((path, text))
        }
        return files.sorted { $0.0 < $1.0 }
    }

    /// `regex` with `\b` at every change between a word character and another: Unicode's default word boundaries
    /// run on across a period between letters, so `XRepository.member` would read as one word and be missed.
    static func word<Output>(_ regex: Regex<Output>) -> Regex<Output> { regex.wordBoundaryKind(.simple) }

    /// "File.swift → XRepository" for every use of a repository outside its folder and `Storage/`.
    static func crossings() throws -> Set<String> {
        let files = try sources()
        var owner: [String: String] = [:]
        for (path, text) in files {
            for match in text.matches(
                of: /(?m)^(?:public |package |final )*(?:struct|class|enum) ([A-Z][A-Za-z]*Repository)\b/)
            {
                owner[String(match.1)] = String(path.prefix { $0 != "/" })
            }
        }
        var found: Set<String> = []
        for (path, text) in files {
            let folder = String(path.prefix { $0 != "/" })
            guard folder != "Storage" else { continue }
            for match in text.matches(of: Self.word(/\b([A-Z][A-Za-z]*Repository)\b/)) {
                let name = String(match.1)
                if let home = owner[name], home != folder { found.insert("\(path) → \(name)") }
            }
        }
        return found
    }

    /// The folders of features; `Storage/`, `Security/` and `Mail/` lie below them, `App/` above.
    static let features: Set<String> = [
        "Accounts", "Admin", "Companies", "Credentials", "Factors", "Invitations", "Passkeys", "Sessions", "Sync",
        "Web",
    ]
    static let lowerLayers: Set<String> = ["Storage", "Security", "Mail"]

    /// "File.swift → Type" for every use, in a lower layer, of a type declared in a feature's folder.
    static func reachingUp() throws -> Set<String> {
        let files = try sources()
        var owner: [String: String] = [:]
        for (path, text) in files {
            let folder = String(path.prefix { $0 != "/" })
            guard features.contains(folder) else { continue }
            for match in text.matches(
                of: /(?m)^(?:public |package |final )*(?:struct|class|enum|actor|protocol) ([A-Z][A-Za-z]*)\b/)
            {
                owner[String(match.1)] = folder
            }
        }
        var found: Set<String> = []
        for (path, text) in files where lowerLayers.contains(String(path.prefix { $0 != "/" })) {
            for match in text.matches(of: Self.word(/\b([A-Z][A-Za-z]*)\b/)) where owner[String(match.1)] != nil {
                found.insert("\(path) → \(match.1)")
            }
        }
        return found
    }

    @Test("a repository is used from its own folder and Storage/ only: other features use its owner's interface")
    func repositoriesStayHome() throws {
        let found = try Self.crossings()
        #expect(try Self.sources().count > 100, "the sources were not read")
        #expect(found.isEmpty, "use the owning feature's interface instead: \(found.sorted())")
    }

    @Test("Storage/, Security/ and Mail/ use no type of a feature, but for the known ones, which only shrink")
    func lowerLayersStayLow() throws {
        let found = try Self.reachingUp()
        let added = found.subtracting(Self.reachingUpToday).sorted()
        #expect(added.isEmpty, "a lower layer reaches up into a feature: \(added)")
        let gone = Self.reachingUpToday.subtracting(found).sorted()
        #expect(gone.isEmpty, "gone, take them off the list: \(gone)")
    }

    /// Today's: the mailer reads the recipient's language from the account and renders with the pages' templates;
    /// two migrations take a code's length from the feature that makes it, and migration 6 writes the refresh
    /// rotation's trigger, which is kept beside the rule it enforces (`Sessions/RefreshRotation.swift`).
    static let reachingUpToday: Set<String> = [
        "Mail/Mailer.swift → AccountDirectory",
        "Mail/Mailer.swift → AccountRecord",
        "Mail/Mailer.swift → Templates",
        "Storage/Migrations.swift → PKCE",
        "Storage/Migrations.swift → RefreshRotationSQL",
        "Storage/Migrations.swift → TOTP",
    ]
}
