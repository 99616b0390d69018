import Foundation

/// The OpenAPI document this module's types are generated from, as shipped with the binary.
public enum GatehouseAPIDocument {
    /// The document's bytes, read from the module's resources.
    public static func yaml() throws -> Data {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "yaml") else {
            throw CocoaError(.fileNoSuchFile)
        }
        return try Data(contentsOf: url)
    }
}
