import AsyncHTTPClient
import Foundation
import JWTKit
import NIOCore

/// Sign in with Apple's REST API as far as the server needs it: exchanging an authorization code for Apple's
/// refresh token (`POST /auth/token`), and revoking that token (`POST /auth/revoke`) when the account or the Apple
/// identity goes (App Store Review Guideline 5.1.1(v)). Both authenticate with a client secret the server signs: an
/// ES256 JWT from the team's key (`kid` the key id; `iss` the team id, `sub` the client id, `aud`
/// `https://appleid.apple.com`), which Apple accepts for at most 15,777,000 s. It is signed once and signed again
/// when less than a tenth of its life is left.
actor AppleSignInAPI {
    /// Apple's longest client-secret lifetime (six months), and the one used.
    static let clientSecretLifetime: TimeInterval = 15_777_000
    static let audience = "https://appleid.apple.com"

    /// Why a call failed; the message names the status and Apple's `error`, never a secret or a token.
    struct Failure: Error, CustomStringConvertible {
        /// Apple answered that the code or token itself is bad (`invalid_grant`, `invalid_request`): retrying cannot
        /// help. Our own fault (`invalid_client`: a wrong key, team or client id) is not that: the operator can fix
        /// it, so sign-ins go on and revocations are retried.
        let refused: Bool
        let description: String
    }

    private struct ClientSecret: JWTPayload {
        var iss: String
        var iat: IssuedAtClaim
        var exp: ExpirationClaim
        var aud: String
        var sub: String

        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    let teamID: String
    let keyID: String
    let clientID: String
    let baseURL: String
    private let key: ES256PrivateKey
    private var keys: JWTKeyCollection?
    private var secret: (value: String, renewAt: Date)?

    /// The API as the settings describe it, or nil when they do not give a team, a key and a client id.
    init?(settings: AppleSignInSettings, audiences: [String]) {
        guard let teamID = settings.teamID, let keyID = settings.keyID, let pem = settings.privateKey,
            let clientID = settings.clientID ?? audiences.first, let key = try? ES256PrivateKey(pem: pem)
        else { return nil }
        self.teamID = teamID
        self.keyID = keyID
        self.clientID = clientID
        self.baseURL = settings.apiURL
        self.key = key
    }

    /// The client secret valid at `now`, signed anew when less than a tenth of its lifetime is left.
    func clientSecret(now: Date) async throws -> String {
        if let secret, now < secret.renewAt { return secret.value }
        // Whole seconds: Apple reads `iat` and `exp` as integers.
        let now = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        let claims = ClientSecret(
            iss: teamID, iat: IssuedAtClaim(value: now),
            exp: ExpirationClaim(value: now.addingTimeInterval(Self.clientSecretLifetime)), aud: Self.audience,
            sub: clientID)
        let keys: JWTKeyCollection
        if let kept = self.keys {
            keys = kept
        } else {
            keys = await JWTKeyCollection().add(ecdsa: key, kid: JWKIdentifier(string: keyID))
            self.keys = keys
        }
        let value = try await keys.sign(claims, kid: JWKIdentifier(string: keyID))
        secret = (value, now.addingTimeInterval(Self.clientSecretLifetime * 0.9))
        return value
    }

    /// What the token endpoint answers for an authorization code.
    struct Tokens: Decodable, Sendable {
        var refresh_token: String?
        var id_token: String?
    }

    /// Exchanges an authorization code for Apple's tokens.
    func exchange(code: String, now: Date) async throws -> Tokens {
        let body = try await call(
            "/auth/token",
            form: [
                "client_id": clientID, "client_secret": try await clientSecret(now: now), "code": code,
                "grant_type": "authorization_code",
            ])
        do {
            return try JSONDecoder().decode(Tokens.self, from: Data(buffer: body))
        } catch {
            throw Failure(refused: false, description: "Apple's token endpoint answered something that is not JSON")
        }
    }

    /// Revokes a refresh token: afterwards the user sees the app gone from "Sign in with Apple" in their settings.
    func revoke(refreshToken: String, now: Date) async throws {
        _ = try await call(
            "/auth/revoke",
            form: [
                "client_id": clientID, "client_secret": try await clientSecret(now: now), "token": refreshToken,
                "token_type_hint": "refresh_token",
            ])
    }

    private func call(_ path: String, form: [String: String]) async throws -> ByteBuffer {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        request.body = .bytes(
            ByteBuffer(string: UpstreamProvider.form(form.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })))
        let response: HTTPClientResponse
        let body: ByteBuffer
        do {
            response = try await HTTPClient.shared.execute(request, timeout: .seconds(15))
            body = try await response.body.collect(upTo: 1 << 20)
        } catch {
            throw Failure(refused: false, description: "Apple's \(path) could not be reached")
        }
        guard response.status == .ok else {
            let apple = (try? JSONDecoder().decode([String: String].self, from: Data(buffer: body)))?["error"]
            let code = response.status.code
            throw Failure(
                refused: code == 400 && (apple == "invalid_grant" || apple == "invalid_request"),
                description: "Apple's \(path) answered \(code)" + (apple.map { " \($0)" } ?? ""))
        }
        return body
    }
}
