import AsyncHTTPClient
import Crypto
import Foundation
import JWTKit
import NIOCore

/// What a verified Apple identity token says about the person.
struct AppleIdentity: Sendable {
    let subject: String
    let email: String?
    let emailVerified: Bool
    /// When the token stops being valid: until then it is remembered, so it signs in once.
    let expiresAt: Date
}

/// Why an Apple identity token was refused (never includes the token).
enum AppleIdentityError: Error, CustomStringConvertible {
    case keysUnavailable
    case signature
    case audience
    case nonce
    case nonceRequired

    var description: String {
        switch self {
        case .keysUnavailable: "Apple's signing keys could not be fetched"
        case .signature: "signature, issuer or expiry did not verify"
        case .audience: "it was not issued for this app"
        case .nonce: "the nonce does not match"
        case .nonceRequired: "the token carries a nonce, so the request must send it"
        }
    }
}

/// Verifies Sign in with Apple identity tokens against Apple's published keys (fetched and cached), the configured
/// audiences, and the nonce.
actor AppleIdentityVerifier {
    private let jwksURL: String
    private let audiences: [String]
    private var keys: JWTKeyCollection?
    private var fetchedAt: Date?

    init(jwksURL: String, audiences: [String]) {
        self.jwksURL = jwksURL
        self.audiences = audiences
    }

    func verify(_ token: String, nonce: String?) async throws -> AppleIdentity {
        let payload: AppleIdentityToken
        do {
            payload = try await collection(forceRefresh: false).verify(token, as: AppleIdentityToken.self)
        } catch let error as JWTError where error.errorType == .unknownKID {
            payload = try await collection(forceRefresh: true).verify(token, as: AppleIdentityToken.self)
        } catch is AppleIdentityError {
            throw AppleIdentityError.keysUnavailable
        } catch {
            throw AppleIdentityError.signature
        }
        guard payload.audience.value.contains(where: audiences.contains) else { throw AppleIdentityError.audience }
        // A token minted with a nonce is bound to the request that made it: without the nonce it could be replayed
        // by anyone who saw it.
        if payload.nonce != nil, nonce == nil { throw AppleIdentityError.nonceRequired }
        if let nonce {
            // Apps pass the raw nonce; Apple puts its SHA-256 (hex) in the token, as Supabase expects.
            let hashed = SHA256.hash(data: Data(nonce.utf8)).map { String(format: "%02x", $0) }.joined()
            guard let claimed = payload.nonce, Secrets.constantTimeEquals(claimed, hashed) || claimed == nonce else {
                throw AppleIdentityError.nonce
            }
        }
        return AppleIdentity(
            subject: payload.subject.value, email: payload.email, emailVerified: payload.emailVerified?.value ?? false,
            expiresAt: payload.expires.value)
    }

    private func collection(forceRefresh: Bool) async throws -> JWTKeyCollection {
        if !forceRefresh, let keys, let fetchedAt, Date().timeIntervalSince(fetchedAt) < 3600 { return keys }
        var request = HTTPClientRequest(url: jwksURL)
        request.method = .GET
        do {
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            guard response.status == .ok else { throw AppleIdentityError.keysUnavailable }
            let body = try await response.body.collect(upTo: 1 << 20)
            let collection = try await JWTKeyCollection().add(jwksJSON: String(buffer: body))
            keys = collection
            fetchedAt = Date()
            return collection
        } catch {
            if let keys { return keys }
            throw AppleIdentityError.keysUnavailable
        }
    }
}
