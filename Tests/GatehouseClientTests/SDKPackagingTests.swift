import Foundation
import Testing

@testable import GatehouseClient

/// What Apple asks of an SDK that apps embed: a privacy manifest that names the required-reason APIs the SDK's own
/// code uses, each with one of the reasons Apple lists, and that says it does not track.
@Suite("SDK packaging")
struct SDKPackagingTests {
    /// The source's manifest (this file's path through Tests/sdk-alone's link resolved to the repository's).
    static let manifest = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/GatehouseClient/PrivacyInfo.xcprivacy")

    /// Apple's required-reason API categories and the reasons each allows ("Describing use of required reason API").
    static let reasons: [String: Set<String>] = [
        "NSPrivacyAccessedAPICategoryFileTimestamp": ["DDA9.1", "C617.1", "3B52.1", "0A2A.1"],
        "NSPrivacyAccessedAPICategorySystemBootTime": ["35F9.1", "8FFB.1", "3D61.1"],
        "NSPrivacyAccessedAPICategoryDiskSpace": ["85F4.1", "E174.1", "7D9E.1", "B728.1"],
        "NSPrivacyAccessedAPICategoryActiveKeyboards": ["3EC4.1", "54BD.1"],
        "NSPrivacyAccessedAPICategoryUserDefaults": ["CA92.1", "1C8F.1", "C56D.1", "AC6B.1"],
    ]

    static func readManifest(_ data: Data) throws -> [String: Any] {
        try #require(PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any])
    }

    @Test("The privacy manifest tracks nobody, collects nothing, and gives an Apple reason for each API it names")
    func privacyManifest() throws {
        let plist = try Self.readManifest(try Data(contentsOf: Self.manifest))
        #expect(plist["NSPrivacyTracking"] as? Bool == false)
        #expect((plist["NSPrivacyTrackingDomains"] as? [Any])?.isEmpty == true)
        #expect((plist["NSPrivacyCollectedDataTypes"] as? [Any])?.isEmpty == true)
        let declared = try #require(plist["NSPrivacyAccessedAPITypes"] as? [[String: Any]])
        var categories: [String] = []
        for entry in declared {
            let category = try #require(entry["NSPrivacyAccessedAPIType"] as? String)
            let given = try #require(entry["NSPrivacyAccessedAPITypeReasons"] as? [String])
            categories.append(category)
            let allowed = try #require(Self.reasons[category], "\(category) is not one of Apple's categories")
            #expect(!given.isEmpty && given.allSatisfy(allowed.contains), "\(category): \(given)")
        }
        #expect(Set(categories).count == categories.count)
        // The app lock measures its grace period on ContinuousClock, whose instants come from the time since boot.
        #expect(categories.contains("NSPrivacyAccessedAPICategorySystemBootTime"))
    }

    @Test("The built SDK carries the privacy manifest as its resource, byte for byte")
    func manifestInBundle() throws {
        let built = try #require(Bundle.module.url(forResource: "PrivacyInfo", withExtension: "xcprivacy"))
        #expect(try Data(contentsOf: built) == Data(contentsOf: Self.manifest))
    }
}
