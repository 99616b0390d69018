import AsyncHTTPClient
import Foundation
import JWTKit

/// The App Store Server API as far as reconciliation needs it: Get All Subscription Statuses
/// (`GET /inApps/v1/subscriptions/{transactionId}`), authorized by a JWT signed with the team's in-app purchase key
/// (ES256, `kid` the key id; `iss` the issuer id, `aud` appstoreconnect-v1, `bid` the bundle id; five minutes).
struct AppStoreServerAPI: Sendable {
    static let productionURL = "https://api.storekit.itunes.apple.com"
    static let sandboxURL = "https://api.storekit-sandbox.itunes.apple.com"

    /// Why a call failed; the message names the status, never the key or the token.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// What Get All Subscription Statuses answers.
    struct Statuses: Decodable, Sendable {
        struct Group: Decodable, Sendable {
            var subscriptionGroupIdentifier: String?
            var lastTransactions: [Last]
        }

        struct Last: Decodable, Sendable {
            var originalTransactionId: String
            /// 1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked.
            var status: Int
            var signedTransactionInfo: String
            var signedRenewalInfo: String?
        }

        var environment: String?
        var bundleId: String?
        var data: [Group]
    }

    private struct Token: JWTPayload {
        var iss: String
        var iat: IssuedAtClaim
        var exp: ExpirationClaim
        var aud: String
        var bid: String

        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    let issuerID: String
    let keyID: String
    let bundleID: String
    /// Replaces Apple's base URLs (a proxy, or the tests' fake of the API).
    let baseURL: String?
    private let keys: JWTKeyCollection

    /// The API as the settings describe it; a clear error when a setting it needs is missing.
    init(settings: AppStoreSettings) async throws(ConfigurationError) {
        guard let issuerID = settings.issuerID, let keyID = settings.keyID, let file = settings.keyFile,
            let bundleID = settings.bundleIDs.first
        else {
            throw ConfigurationError(
                "reconciling needs --app-store-bundle-ids, --app-store-issuer-id, --app-store-key-id and "
                    + "--app-store-key-file")
        }
        guard let pem = FileManager.default.contents(atPath: file), let key = try? ES256PrivateKey(pem: pem) else {
            throw ConfigurationError("--app-store-key-file must name the in-app purchase key (.p8, PEM): '\(file)'")
        }
        self.issuerID = issuerID
        self.keyID = keyID
        self.bundleID = bundleID
        self.baseURL = settings.apiURL
        keys = await JWTKeyCollection().add(ecdsa: key, kid: JWKIdentifier(string: keyID))
    }

    /// Every subscription status of the subscription an original transaction belongs to.
    func statuses(originalTransactionID: String, environment: AppStoreEnvironment, now: Date) async throws
        -> Statuses
    {
        let base = baseURL ?? (environment == .production ? Self.productionURL : Self.sandboxURL)
        let id = originalTransactionID.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        var request = HTTPClientRequest(url: base + "/inApps/v1/subscriptions/" + id)
        request.headers.add(name: "Authorization", value: "Bearer " + (try await token(now: now)))
        let response: HTTPClientResponse
        do {
            response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        } catch {
            throw Failure(description: "the App Store Server API did not answer")
        }
        let body = try await response.body.collect(upTo: 4 << 20)
        guard response.status == .ok else {
            throw Failure(description: "the App Store Server API answered \(response.status.code)")
        }
        do {
            return try JSONDecoder().decode(Statuses.self, from: body)
        } catch {
            throw Failure(description: "the App Store Server API's answer is not the statuses' shape")
        }
    }

    private func token(now: Date) async throws -> String {
        var header = JWTHeader()
        header.typ = "JWT"
        return try await keys.sign(
            Token(
                iss: issuerID, iat: IssuedAtClaim(value: now), exp: ExpirationClaim(value: now.addingTimeInterval(300)),
                aud: "appstoreconnect-v1", bid: bundleID),
            kid: JWKIdentifier(string: keyID), header: header)
    }
}
