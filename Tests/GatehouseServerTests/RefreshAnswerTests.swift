import Foundation
import GatehouseAPI
import Testing

@testable import GatehouseServer

/// A refresh is answered with the user's JSON spliced in as the session cache keeps it (`FastPath`): the same
/// bytes the generated serializer writes, and the same user `GET /auth/v1/user` shows.
@Suite("A refresh's answer, spliced")
struct RefreshAnswerTests {
    @Test("a refreshed session is the generated serializer's bytes, its user byte for byte GET /auth/v1/user's")
    func sameBytes() async throws {
        try await AccountHarness.with { h in try await Self.sameBytes(h) }
    }

    static func sameBytes(_ h: AccountHarness) async throws {
        let signedIn = try await h.confirmedAccount(AccountHarness.newEmail())
        // Metadata with characters JSON escapes, so the user's JSON is more than plain ASCII.
        let updated = try await h.client.put(
            "/auth/v1/user", ["data": ["nickname": "Ada \"the\" Lovelace/\u{e9}", "lines": "a\nb"]],
            bearer: signedIn.access)
        #expect(updated.status == 200)

        let reply = try await h.client.refresh(signedIn.refresh)
        #expect(reply.status == 200)
        #expect(reply.headers["content-type"] == "application/json; charset=utf-8")
        let session = try JSONDecoder.withMilliseconds.decode(Schemas.Session.self, from: Data(reply.body.utf8))
        #expect(Array(reply.body.utf8) == (try WireJSON.encode(session)))
        #expect(session.tokenType == .bearer)
        #expect(session.refreshToken != signedIn.refresh)
        #expect(session.sessionExpiresAt != nil)
        #expect(session.user.userMetadata["nickname"] == JSONValue.string("Ada \"the\" Lovelace/\u{e9}"))

        let user = try await h.client.get("/auth/v1/user", bearer: session.accessToken)
        #expect(user.status == 200)
        let userJSON = try #require(reply.body.range(of: #","user":"#)).upperBound
        #expect(String(reply.body[userJSON...].dropLast()) == user.body)

        // The new access token is good, and the old refresh token replays the same successor within the grace
        // window, through the same path.
        let replay = try await h.client.refresh(signedIn.refresh)
        #expect(replay.status == 200)
        #expect(replay.json["refresh_token"] as? String == session.refreshToken)
    }

    @Test("a refresh the splice does not take as it is keeps the generated handler's answers")
    func handedOn() async throws {
        try await AccountHarness.with { h in try await Self.handedOn(h) }
    }

    static func handedOn(_ h: AccountHarness) async throws {
        let email = AccountHarness.newEmail()
        let signedIn = try await h.confirmedAccount(email)
        // A password grant's fields in a refresh: the generated body decodes it as the password grant and refuses it.
        let mixed = try await h.client.post(
            "/auth/v1/token?grant_type=refresh_token",
            ["refresh_token": signedIn.refresh, "email": email, "password": "correct horse battery"])
        #expect(mixed.status == 400)
        #expect(mixed.json["error_code"] as? String == "bad_json")
        // An unknown token: the refusal as the generated handler words it.
        let unknown = try await h.client.refresh("not-a-token")
        #expect(unknown.status == 400)
        #expect(unknown.json["error_code"] as? String == "refresh_token_not_found")
        // The token was never used by the refused requests: it still refreshes.
        #expect(try await h.client.refresh(signedIn.refresh).status == 200)
    }
}
