// swift-tools-version:6.2
// A load generator for Gatehouse, kept as its own package so that building the server never compiles it.
import PackageDescription

let package = Package(
    name: "gatehouse-bench",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "gatehouse-bench", targets: ["gatehouse-bench"])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
    ],
    targets: [
        .executableTarget(
            name: "gatehouse-bench",
            dependencies: [
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
