import Foundation
import PackagePlugin

/// Generates GatehouseAPI's types, server and client from its `openapi.yaml` as it builds, as swift-openapi-generator's
/// own `OpenAPIGenerator` plugin does (same command, same files), but with the generator behind the `Server` trait.
///
/// SwiftPM builds the tool of every build plugin that a target reachable from any of a package's products uses, even
/// in an app that links none of those targets: with the generator's own plugin on GatehouseAPI, an app that builds
/// only GatehouseClient still compiled the generator (OpenAPIKit, Yams and the rest). This plugin's dependency on the
/// generator has the trait's condition, so with the trait off SwiftPM neither resolves nor builds the generator, and
/// this plugin adds no command: nothing such an app builds needs GatehouseAPI. (The SDK's client is committed, in
/// Sources/GatehouseClientAPI, by scripts/generate-client.sh.)
@main
struct GatehouseAPIGenerator: BuildToolPlugin {
    /// What the generator writes with `--plugin-source build`: every file of every mode, empty when not asked for
    /// (swift-openapi-generator's `OutputFileName`; a generator that adds a file needs it added here).
    static let outputFiles = [
        "Types.swift", "Types+Components.swift", "Types+Operations.swift", "Types+Components+Schemas.swift",
        "Types+Components+Parameters.swift", "Types+Components+RequestBodies.swift",
        "Types+Components+Responses.swift", "Types+Components+Headers.swift", "Client.swift", "Server.swift",
    ]

    func createBuildCommands(context: PluginContext, target: Target) async throws -> [Command] {
        // Without the Server trait the generator is not a dependency at all.
        guard let generator = try? context.tool(named: "swift-openapi-generator") else { return [] }
        guard let sources = (target as? SwiftSourceModuleTarget)?.sourceFiles,
            let document = sources.first(where: { $0.url.lastPathComponent == "openapi.yaml" })?.url,
            let config = sources.first(where: { $0.url.lastPathComponent == "openapi-generator-config.yaml" })?.url
        else {
            throw GeneratorInputsMissing(target: target.name)
        }
        let output = context.pluginWorkDirectoryURL.appending(component: "GeneratedSources")
        return [
            .buildCommand(
                displayName: "Running swift-openapi-generator",
                executable: generator.url,
                arguments: [
                    "generate", document.path(percentEncoded: false), "--config", config.path(percentEncoded: false),
                    "--output-directory", output.path(percentEncoded: false), "--plugin-source", "build",
                ],
                inputFiles: [config, document],
                outputFiles: Self.outputFiles.map { output.appending(component: $0) }
            )
        ]
    }
}

/// A target this plugin was applied to without its `openapi.yaml` or `openapi-generator-config.yaml`.
struct GeneratorInputsMissing: Error, CustomStringConvertible {
    let target: String

    var description: String {
        "\(target) needs an openapi.yaml and an openapi-generator-config.yaml for swift-openapi-generator"
    }
}
