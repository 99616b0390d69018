import Foundation
import GatehouseClientTesting
import Testing

@testable import GatehouseClient

/// The SDK's pure rules: field values on the wire, error mapping, the stores' file names. No I/O.
@Suite("GatehouseClient rules")
struct ClientRulesTests {
    @Test("Field values go to the server's JSON and back: timestamps as $ts, references as $ref")
    func fieldValues() throws {
        let moment = try Date(
            "2026-11-22T09:30:15.250Z", strategy: .iso8601.year().month().day().time(includingFractionalSeconds: true))
        let values: [FieldValue] = [
            .null, .bool(true), .int(42), .double(2.5), .string("Ada"), .date(moment), .reference("a1b2"),
        ]
        for value in values { #expect(FieldValue(value.json) == value) }
        #expect(FieldValue.date(moment).json == .object(["$ts": .string("2026-11-22T09:30:15.250Z")]))
        #expect(FieldValue.reference("a1b2").json == .object(["$ref": .string("a1b2")]))
        // The server also sends timestamps without fractions; anything nested it never sends reads as null.
        #expect(
            FieldValue(.object(["$ts": .string("2026-11-22T09:30:15Z")])) == .date(moment.addingTimeInterval(-0.25)))
        #expect(FieldValue(.array([.int(1)])) == .null)
    }

    @Test("Error bodies become typed errors; a 429 on a password check becomes a lockout with its end")
    func errors() {
        let now = Date(timeIntervalSince1970: 1_000)
        func error(_ status: Int, _ body: String, retryAfter: String? = nil) -> GatehouseError {
            ErrorBody.error(status: status, body: Data(body.utf8), retryAfter: retryAfter, receivedAt: now)
        }
        #expect(error(400, #"{"code":"invalid_credentials","message":"x"}"#) == .invalidCredentials)
        #expect(
            error(429, #"{"code":"over_request_rate_limit"}"#, retryAfter: "30")
                == .rateLimited(retryAfter: RetryAfter(date: now + 30)))
        #expect(
            error(422, #"{"code":"weak_password","weak_password":{"reasons":["length"]}}"#)
                == .weakPassword(reasons: ["length"]))
        #expect(error(403, #"{"code":"refresh_token_already_used"}"#) == .sessionExpired)
        #expect(error(403, #"{"code":"company_access_revoked"}"#) == .companyAccessRevoked)
        #expect(error(409, #"{"code":"username_taken","message":"Taken"}"#).code == "username_taken")
        #expect(error(502, "<html>") == .server(status: 502, code: "http_502", message: ""))
        #expect(
            GatehouseError.rateLimited(retryAfter: RetryAfter(date: now + 30)).asLockout()
                == .lockedOut(until: now + 30))
        #expect(GatehouseError.invalidCredentials.asLockout() == .invalidCredentials)
    }

    @Test("A file store's companion sits beside it; a memory store's is the same one each time")
    func companions() throws {
        let file = FileSessionStore(url: URL(fileURLWithPath: "/tmp/app/session.json"))
        let companion = try #require(file.companion(named: "company") as? FileSessionStore)
        #expect(companion.url.path == "/tmp/app/session-company.json")
        let memory = MemorySessionStore()
        let session = AuthSession(
            accessToken: "a", refreshToken: "r", expiresAt: Date(), userID: "u", email: nil, companyID: "c")
        try memory.companion(named: "company").save(session)
        #expect(try memory.companion(named: "company").load() == session)
        #expect(try memory.load() == nil)
    }

    @Test("The Apple nonce helper: a fresh raw value each time, and its SHA-256 in hex")
    func appleNonce() {
        let nonce = AppleNonce()
        #expect(nonce.raw.count >= 43 && nonce.raw != AppleNonce().raw)
        #expect(nonce.hashed.count == 64 && nonce.hashed.allSatisfy(\.isHexDigit))
    }
}
