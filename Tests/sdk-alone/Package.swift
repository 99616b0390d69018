// swift-tools-version:6.2
// The SDK's own tests (Tests/GatehouseClientTests, linked here) in a package that adds Gatehouse as an app does, with
// its Server trait off: SwiftPM resolves and compiles the SDK's modules and none of the server's, so the tests build
// and run while the server does not compile, and prove they need nothing of it. `swift test --package-path
// Tests/sdk-alone`; scripts/sdk-closure.sh runs it and checks what it compiled.
import Foundation
import PackageDescription

/// A package added by path is named after its folder, whatever the clone is called.
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized

let package = Package(
    name: "sdk-alone",
    platforms: [.macOS(.v14), .iOS(.v17)],
    dependencies: [
        .package(path: "../..", traits: []),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
    ],
    targets: [
        .testTarget(
            name: "GatehouseClientTests",
            dependencies: [
                .product(name: "GatehouseClient", package: root.lastPathComponent),
                .product(name: "GatehouseClientTesting", package: root.lastPathComponent),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ],
            path: "GatehouseClientTests"
        )
    ],
    swiftLanguageModes: [.v6]
)
