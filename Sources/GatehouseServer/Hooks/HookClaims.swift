import GatehouseAPI
import JWTKit

/// The claims a custom access token hook answered, signed as they are (`AuthHooks.customizeClaims` checked the
/// required ones). Gatehouse reads its own tokens back as `AccessTokenClaims`: a hook that drops a claim Gatehouse
/// checks beyond GoTrue's required ones (`iss`, `nbf`, `amr`, `sid`) makes tokens its own API refuses.
struct HookClaims: JWTPayload {
    let claims: JSONFields

    init(_ claims: JSONFields) { self.claims = claims }

    init(from decoder: any Decoder) throws {
        claims = try decoder.singleValueContainer().decode(JSONFields.self)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(claims)
    }

    /// Signed only, never verified as this type.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
