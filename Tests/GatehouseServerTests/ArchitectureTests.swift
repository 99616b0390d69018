import Foundation
import Testing

/// The shape of the code, read from the sources (issue 36, item 4): a feature's SQL is its own. A repository is used
/// from its own folder and from `Storage/`; another feature asks through the small interface the owner exports.
/// Today's crossings are listed below, so that none is added unseen and each one removed is taken off the list: the
/// list only shrinks.
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
            for match in text.matches(of: /\b([A-Z][A-Za-z]*Repository)\b/) {
                let name = String(match.1)
                if let home = owner[name], home != folder { found.insert("\(path) → \(name)") }
            }
        }
        return found
    }

    /// The crossings at the start of the structure work; take a line off when its crossing goes.
    static let known: Set<String> = [
        "Accounts/AccountDeletion.swift → MailQueueRepository",
        "Accounts/AccountDeletion.swift → SyncRepository",
        "Accounts/AccountThrottling.swift → CooldownRepository",
        "Accounts/AccountThrottling.swift → ThrottleRepository",
        "Accounts/TokenService.swift → ThrottleRepository",
        "Accounts/UserReader.swift → FactorRepository",
        "Admin/AdminService.swift → AccountRepository",
        "Admin/AdminService.swift → OneTimeCodeRepository",
        "Admin/Operator.swift → AccountRepository",
        "Admin/Operator.swift → FactorRepository",
        "Companies/CompanyService.swift → CredentialRepository",
        "Companies/CompanyService.swift → SyncRepository",
        "Companies/ShareService.swift → AccountRepository",
        "Credentials/CredentialService.swift → AccountRepository",
        "Credentials/CredentialService.swift → ThrottleRepository",
        "Factors/FactorService.swift → AccountRepository",
        "Factors/FactorService.swift → ThrottleRepository",
        "Mail/Mailer.swift → AccountRepository",
        "Passkeys/PasskeyService.swift → AccountRepository",
        "Passkeys/PasskeyService.swift → CredentialRepository",
        "Sync/InstanceBus.swift → NotificationRepository",
    ]

    @Test("a repository is used from its own folder and Storage/ only, but for the known crossings, which only shrink")
    func repositoriesStayHome() throws {
        let found = try Self.crossings()
        #expect(!found.isEmpty, "no repository use was found: the sources were not read")
        let added = found.subtracting(Self.known).sorted()
        #expect(added.isEmpty, "new crossings, use the owning feature's interface instead: \(added)")
        let gone = Self.known.subtracting(found).sorted()
        #expect(gone.isEmpty, "crossings that are gone, take them off the list: \(gone)")
    }
}
