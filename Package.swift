// swift-tools-version:6.2
import PackageDescription

/// The server's own packages: resolved and built only with the `Server` trait, which is on unless an app turns it off.
let server: TargetDependencyCondition? = .when(traits: ["Server"])

let package = Package(
    name: "Gatehouse",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .executable(name: "gatehouse", targets: ["gatehouse"]),
        .library(name: "GatehouseServer", targets: ["GatehouseServer"]),
        .library(name: "GatehouseAPI", targets: ["GatehouseAPI"]),
        .library(name: "GatehouseClient", targets: ["GatehouseClient"]),
        .library(name: "GatehouseClientTesting", targets: ["GatehouseClientTesting"]),
        .executable(name: "gatehouse-example", targets: ["GatehouseExample"]),
    ],
    // An app that adds this package for `GatehouseClient` turns the server off (`traits: []`), and SwiftPM then leaves
    // the server's packages, and the OpenAPI generator's, out of its resolution (8 packages instead of 43; the SDK's
    // guide, "The first hour with the SDK", Sources/GatehouseClient/GatehouseClient.docc/FirstHour.md).
    traits: [
        .trait(name: "Server", description: "The server, its command line and its tests; the SDK needs none of it."),
        .default(enabledTraits: ["Server"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-openapi-generator", from: "1.14.3"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-openapi-urlsession", from: "1.4.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth", from: "2.5.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
        .package(url: "https://github.com/hummingbird-project/swift-openapi-hummingbird", from: "2.1.0"),
        .package(url: "https://github.com/swift-extras/swift-extras-base64", from: "1.2.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.7.1"),
        .package(url: "https://github.com/vapor/sql-kit", from: "3.36.0"),
        .package(url: "https://github.com/vapor/sqlite-kit", from: "4.5.2"),
        .package(url: "https://github.com/vapor/postgres-kit", from: "2.17.0"),
    ],
    targets: [
        .executableTarget(
            name: "gatehouse",
            dependencies: [
                "GatehouseServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: server),
            ]
        ),
        // The free-form JSON type (JSONValue, JSONFields) that both generated modules map `JSONObject` to.
        .target(name: "GatehouseJSON"),
        // The server's types and protocol, generated from openapi.yaml as it builds.
        .target(
            name: "GatehouseAPI",
            dependencies: [
                "GatehouseJSON",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ],
            resources: [.copy("openapi.yaml")],
            plugins: ["GatehouseAPIGenerator"]
        ),
        // swift-openapi-generator's build plugin with the generator behind the Server trait: SwiftPM builds the tool of
        // any build plugin a product reaches, so with the generator's own plugin every app built the generator too.
        .plugin(
            name: "GatehouseAPIGenerator",
            capability: .buildTool(),
            dependencies: [
                .product(name: "swift-openapi-generator", package: "swift-openapi-generator", condition: server)
            ]
        ),
        // The SDK's client and the types it uses, generated from the same document but committed (Generated/, by
        // scripts/generate-client.sh), so that an app builds no generator.
        .target(
            name: "GatehouseClientAPI",
            dependencies: [
                "GatehouseJSON",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ],
            exclude: ["openapi-generator-config.yaml"]
        ),
        // The SDK apps link: the generated client over URLSession, and nothing of the server.
        .target(
            name: "GatehouseClient",
            dependencies: [
                "GatehouseClientAPI",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIURLSession", package: "swift-openapi-urlsession"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ExtrasBase64", package: "swift-extras-base64"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            resources: [.copy("PrivacyInfo.xcprivacy")]
        ),
        // The SDK's test doubles, for an app's tests and previews, so that the app's own product ships none of them.
        .target(
            name: "GatehouseClientTesting",
            dependencies: [
                "GatehouseClient",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The SDK's example app: the seeds' path through GatehouseClient's public API only.
        .executableTarget(
            name: "GatehouseExample",
            dependencies: ["GatehouseClient", "GatehouseClientTesting"],
            path: "Examples/GatehouseExample"
        ),
        .systemLibrary(name: "CCrypt"),
        // libxmlsec1 and libxml2 for SAML: xmlsec checks the XML signatures and decrypts assertions.
        .systemLibrary(name: "CXMLSec", pkgConfig: "xmlsec1-openssl", providers: [.apt(["libxmlsec1-dev"])]),
        // The few calls Swift cannot make into xmlsec (its macros), and raw DEFLATE for the HTTP-Redirect binding.
        .target(name: "CSAML", dependencies: ["CXMLSec"], linkerSettings: [.linkedLibrary("z")]),
        .target(
            name: "GatehouseServer",
            dependencies: [
                "GatehouseAPI",
                "CCrypt",
                "CSAML",
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth", condition: server),
                .product(name: "CryptoExtras", package: "swift-crypto", condition: server),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio", condition: server),
                .product(name: "NIOCore", package: "swift-nio", condition: server),
                .product(name: "NIOPosix", package: "swift-nio", condition: server),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: server),
                .product(name: "NIOTLS", package: "swift-nio", condition: server),
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: server),
                .product(name: "Crypto", package: "swift-crypto", condition: server),
                .product(name: "ExtrasBase64", package: "swift-extras-base64", condition: server),
                .product(name: "Hummingbird", package: "hummingbird", condition: server),
                .product(name: "OpenAPIHummingbird", package: "swift-openapi-hummingbird", condition: server),
                .product(name: "JWTKit", package: "jwt-kit", condition: server),
                .product(name: "SwiftASN1", package: "swift-asn1", condition: server),
                .product(name: "X509", package: "swift-certificates", condition: server),
                .product(name: "Logging", package: "swift-log", condition: server),
                .product(name: "Metrics", package: "swift-metrics", condition: server),
                .product(name: "Mustache", package: "swift-mustache", condition: server),
                .product(name: "Prometheus", package: "swift-prometheus", condition: server),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: server),
                .product(name: "SQLKit", package: "sql-kit", condition: server),
                .product(name: "SQLiteKit", package: "sqlite-kit", condition: server),
                .product(name: "PostgresKit", package: "postgres-kit", condition: server),
            ],
            resources: [.copy("Resources/common-passwords.txt"), .copy("Web/pages"), .copy("Mail/templates")]
        ),
        // The SDK's tests that need no server, on the SDK's products only: Tests/sdk-alone builds and runs them with the
        // Server trait off, none of the server's modules compiled (scripts/sdk-closure.sh).
        .testTarget(
            name: "GatehouseClientTests",
            dependencies: [
                "GatehouseClient",
                "GatehouseClientTesting",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ]
        ),
        .testTarget(
            name: "GatehouseServerTests",
            dependencies: [
                "GatehouseServer",
                "GatehouseAPI",
                "GatehouseClient",
                "GatehouseClientTesting",
                .product(name: "HummingbirdTesting", package: "hummingbird", condition: server),
                .product(name: "CryptoExtras", package: "swift-crypto", condition: server),
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: server),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio", condition: server),
                .product(name: "NIOEmbedded", package: "swift-nio", condition: server),
                .product(name: "JWTKit", package: "jwt-kit", condition: server),
                .product(name: "SQLKit", package: "sql-kit", condition: server),
                .product(name: "SwiftASN1", package: "swift-asn1", condition: server),
                .product(name: "X509", package: "swift-certificates", condition: server),
            ],
            exclude: ["Support/smtp_sink.py", "Support/app_store_peer.py"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
