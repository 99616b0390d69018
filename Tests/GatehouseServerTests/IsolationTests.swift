import Foundation
import GatehouseServer
import Testing

@Suite("Company isolation")
struct IsolationTests {
    /// Who calls, in matrix order.
    enum Principal: String, CaseIterable {
        case none, accountOnly, otherCompany, readOnly, member, manager, owner
    }

    struct Case {
        let method: String
        let path: String
        let body: [String: Any]?
        /// Expected status per principal, in `Principal.allCases` order; nil skips a destructive call.
        let expected: [Int?]
    }

    @Test(
        "every company-scoped endpoint × every kind of caller × own and foreign ids: statuses per policy, no foreign rows"
    )
    func matrix() async throws {
        try await AccountHarness.with { h in
            var owner = try await h.person("owner-a")
            let a = try await h.company("Alpha Inc", owner: &owner)
            var readOnly = try await h.person("ro")
            var member = try await h.person("member")
            var manager = try await h.person("manager")
            try await h.join(a, &readOnly, owner: owner, permission: "read_only")
            try await h.join(a, &member, owner: owner)
            try await h.join(a, &manager, owner: owner)
            let ownerToken = try #require(owner.company?.access)
            #expect(
                try await h.client.patch(
                    "/v1/companies/\(a)/members/\(manager.id)", ["manager_mask": 6], bearer: ownerToken
                ).status == 200)

            var ownerB = try await h.person("owner-b")
            let b = try await h.company("Bravo Corp", owner: &ownerB)
            let shareB = try await h.client.createShare(
                b, permission: "read_write", bearer: try #require(ownerB.company?.access))
            let shareBID = try #require(shareB.json["id"] as? String)
            let invitedB = AccountHarness.newEmail("invited-b")
            let invitationB = try await h.client.invite(
                b, email: invitedB, bearer: try #require(ownerB.company?.access))
            let invitationBID = try #require(invitationB.json["id"] as? String)
            // Records: one of company B, and one of company A in a department nobody but the owner sees.
            let recordB = newRecordID()
            let recordA = newRecordID()
            #expect(
                try await h.client.push(
                    b, client: "b", [upsert(recordB, base: 0, ["secret": "bravo-secret"])],
                    bearer: try #require(ownerB.company?.access)
                ).status == 200)
            #expect(
                try await h.client.push(
                    a, client: "a", [upsert(recordA, base: 0, ["secret": "dept-four"], deptMask: 4)],
                    bearer: ownerToken
                ).status == 200)
            let deletable = try await h.client.createShare(a, permission: "read_only", bearer: ownerToken)
            let deletableID = try #require(deletable.json["id"] as? String)

            let tokens: [Principal: String?] = [
                .none: nil, .accountOnly: owner.account.access, .otherCompany: ownerB.company?.access,
                .readOnly: readOnly.company?.access, .member: member.company?.access, .manager: manager.company?.access,
                .owner: ownerToken,
            ]
            let c = "/v1/companies/\(a)"
            let cases: [Case] = [
                Case(method: "GET", path: c, body: nil, expected: [401, 403, 403, 200, 200, 200, 200]),
                Case(
                    method: "PATCH", path: c, body: ["name": "Alpha Inc"],
                    expected: [401, 403, 403, 403, 403, 403, 200]),
                Case(method: "GET", path: "\(c)/shares", body: nil, expected: [401, 403, 403, 403, 403, 403, 200]),
                Case(
                    method: "GET", path: "\(c)/invitations", body: nil, expected: [401, 403, 403, 403, 403, 403, 200]),
                Case(
                    method: "POST", path: "\(c)/invitations",
                    body: ["email": AccountHarness.newEmail("invited-a"), "role": "read_only"],
                    expected: [401, 403, 403, 403, 403, 403, 201]),
                Case(
                    method: "POST", path: "\(c)/shares", body: ["permission": "read_only"],
                    expected: [401, 403, 403, 403, 403, 403, 201]),
                Case(
                    method: "DELETE", path: "\(c)/shares/\(deletableID)", body: nil,
                    expected: [401, 403, 403, 403, 403, 403, 204]),
                Case(method: "GET", path: "\(c)/members", body: nil, expected: [401, 403, 403, 200, 200, 200, 200]),
                Case(
                    method: "PATCH", path: "\(c)/members/\(member.id)", body: ["dept_mask": 2],
                    expected: [401, 403, 403, 403, 403, 200, 200]),
                Case(
                    method: "DELETE", path: "\(c)/members/no-such-account", body: nil,
                    expected: [401, 403, 403, 403, 403, 403, 404]),
                Case(method: "GET", path: "\(c)/credential", body: nil, expected: [401, 403, 403, 200, 200, 200, 200]),
                Case(
                    method: "POST", path: "\(c)/credential/password",
                    body: ["current_password": "wrong", "new_password": "whatever pw 1"],
                    expected: [401, 403, 403, 400, 400, 400, 400]),
                Case(method: "GET", path: "\(c)/audit", body: nil, expected: [401, 403, 403, 200, 200, 200, 200]),
                Case(
                    method: "GET", path: "\(c)/members/\(owner.id)/image", body: nil,
                    expected: [401, 403, 403, 404, 404, 404, 404]),
                Case(
                    method: "POST", path: "\(c)/transfer", body: ["account_id": "no-such-account"],
                    expected: [401, 403, 403, 403, 403, 403, 404]),
                // Sync: every member of A pulls and pushes (a read-only push answers 200 with each mutation refused).
                Case(method: "POST", path: "\(c)/sync/pull", body: [:], expected: [401, 403, 403, 200, 200, 200, 200]),
                Case(
                    method: "POST", path: "\(c)/sync/push",
                    body: ["client_id": "matrix", "mutations": [upsert(newRecordID(), base: 0, ["n": 1])]],
                    expected: [401, 403, 403, 200, 200, 200, 200]),
                Case(
                    method: "POST", path: "\(c)/sync/digest", body: ["known": [], "complete": true],
                    expected: [401, 403, 403, 200, 200, 200, 200]),
                Case(method: "GET", path: "\(c)/records", body: nil, expected: [401, 403, 403, 200, 200, 200, 200]),
                Case(
                    method: "GET", path: "\(c)/records/\(recordA)", body: nil,
                    expected: [401, 403, 403, 404, 404, 404, 200]),
                Case(
                    method: "GET", path: "\(c)/records/\(recordB)", body: nil,
                    expected: [401, 403, 403, 404, 404, 404, 404]),
                Case(
                    method: "GET", path: "/v1/companies/\(b)/records", body: nil,
                    expected: [401, 403, nil, 403, 403, 403, 403]),
                Case(
                    method: "POST", path: "/v1/companies/\(b)/sync/pull", body: [:],
                    expected: [401, 403, nil, 403, 403, 403, 403]),
                Case(method: "DELETE", path: c, body: nil, expected: [401, 403, 403, 403, 403, 403, nil]),
                Case(method: "POST", path: "\(c)/leave", body: [:], expected: [401, 403, 403, nil, nil, nil, 409]),
                // Endpoints that need only the account session.
                Case(
                    method: "POST", path: "\(c)/login", body: ["username": "x", "password": "wrong pw"],
                    expected: [401, 400, 403, 403, 403, 403, 403]),
                Case(
                    method: "PUT", path: "\(c)/credential",
                    body: ["username": "another", "password": "long enough pw 1"],
                    expected: [401, 409, 403, 403, 403, 403, 403]),
                // Another company's ids, through company A's paths and tokens.
                Case(
                    method: "GET", path: "/v1/companies/\(b)", body: nil, expected: [401, 403, nil, 403, 403, 403, 403]),
                Case(
                    method: "GET", path: "/v1/companies/\(b)/members", body: nil,
                    expected: [401, 403, nil, 403, 403, 403, 403]),
                Case(
                    method: "DELETE", path: "\(c)/shares/\(shareBID)", body: nil,
                    expected: [401, 403, 403, 403, 403, 403, 404]),
                Case(
                    method: "DELETE", path: "\(c)/invitations/\(invitationBID)", body: nil,
                    expected: [401, 403, 403, 403, 403, 403, 404]),
                Case(
                    method: "POST", path: "\(c)/invitations/\(invitationBID)/resend", body: [:],
                    expected: [401, 403, 403, 403, 403, 403, 404]),
                Case(
                    method: "PATCH", path: "\(c)/members/\(ownerB.id)", body: ["dept_mask": 1],
                    expected: [401, 403, 403, 404, 404, 404, 404]),
                Case(
                    method: "DELETE", path: "\(c)/members/\(ownerB.id)", body: nil,
                    expected: [401, 403, 403, 403, 403, 403, 404]),
                Case(
                    method: "GET", path: "\(c)/members/\(ownerB.id)/image", body: nil,
                    expected: [401, 403, 403, 404, 404, 404, 404]),
                Case(
                    method: "POST", path: "\(c)/transfer", body: ["account_id": ownerB.id],
                    expected: [401, 403, 403, 403, 403, 403, 404]),
            ]
            let foreign = [
                b, ownerB.id, shareBID, "Bravo Corp", ownerB.email, recordB, "bravo-secret", invitationBID, invitedB,
            ]
            var checked = 0
            for testCase in cases {
                for (index, principal) in Principal.allCases.enumerated() {
                    guard let expected = testCase.expected[index] else { continue }
                    let reply = try await send(h, testCase, bearer: tokens[principal] ?? nil)
                    #expect(
                        reply.status == expected,
                        "\(testCase.method) \(testCase.path) as \(principal): \(reply.status) \(reply.body.prefix(160))"
                    )
                    if principal != .otherCompany {
                        for value in foreign {
                            #expect(
                                !reply.body.contains(value),
                                "\(testCase.method) \(testCase.path) as \(principal) shows a row of company B")
                        }
                    }
                    if [.readOnly, .member, .manager].contains(principal) {
                        #expect(
                            !reply.body.contains("dept-four") && !reply.body.contains(recordA),
                            "\(testCase.method) \(testCase.path) as \(principal) shows a record of another department")
                    }
                    if reply.status >= 400 {
                        #expect(
                            reply.json["code"] is String, "\(testCase.method) \(testCase.path): error without a code")
                    }
                    checked += 1
                }
            }
            #expect(checked > 150)
            // Company B is untouched by all of the above.
            let bMembers = try await h.client.get(
                "/v1/companies/\(b)/members", bearer: try #require(ownerB.company?.access))
            #expect((bMembers.json["members"] as? [Any])?.count == 1)
            #expect(
                try await h.client.get("/v1/companies/\(b)/shares", bearer: try #require(ownerB.company?.access)).body
                    .contains(shareBID))
        }
    }

    func send(_ h: AccountHarness, _ testCase: Case, bearer: String?) async throws -> HTTPReply {
        switch testCase.method {
        case "GET": try await h.client.get(testCase.path, bearer: bearer)
        case "POST": try await h.client.post(testCase.path, testCase.body ?? [:], bearer: bearer)
        case "PUT": try await h.client.put(testCase.path, testCase.body ?? [:], bearer: bearer)
        case "PATCH": try await h.client.patch(testCase.path, testCase.body ?? [:], bearer: bearer)
        default: try await h.client.delete(testCase.path, bearer: bearer)
        }
    }
}
