// swift-tools-version:6.2
// The SDK's first sync, timed as an app sees it: a program that links GatehouseClient the way an app does (the
// package with its Server trait off), kept as its own package so that building the server never compiles it.
import Foundation
import PackageDescription

/// A package added by path is named after its folder, whatever the clone is called.
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized

let package = Package(
    name: "sdk-sync",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: "../..", traits: []),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-openapi-urlsession", from: "1.4.0"),
    ],
    targets: [
        .executableTarget(
            name: "sdk-sync",
            dependencies: [
                .product(name: "GatehouseClient", package: root.lastPathComponent),
                .product(name: "GatehouseClientTesting", package: root.lastPathComponent),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIURLSession", package: "swift-openapi-urlsession"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
