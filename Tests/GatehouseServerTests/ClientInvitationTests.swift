import Foundation
import GatehouseServer
import Testing

@testable import GatehouseClient

/// The SDK's invitations against the server's router in process: the owner invites, lists, resends and revokes;
/// the invitee lists, accepts with the mailed code, and declines.
@Suite("GatehouseClient invitations")
struct ClientInvitationTests {
    @Test("invite → the invitee's list → accept with the mailed code; resend waits; revoke and decline")
    func invitations() async throws {
        try await AccountHarness.with { h in
            let owner = try AppDevice(h)
            try await owner.signUp(h, "owner")
            let company = try await owner.client.companies.create(name: "Invite Ltd")
            #expect(try await Operator(store: h.server.services.store).setTier(company.id, .business))
            _ = try await owner.client.companies.createCredential(
                in: company.id, username: "olive", password: "blue tractor 42")
            try await owner.client.companies.signIn(to: company.id, username: "olive", password: "blue tractor 42")

            let guest = try AppDevice(h)
            let guestEmail = try await guest.signUp(h, "guest")
            let invitation = try await owner.client.companies.invite(
                email: guestEmail, role: .readOnly, deptMask: 3)
            #expect(invitation.state == .open && invitation.role == .readOnly && invitation.deptMask == 3)
            #expect(try await owner.client.companies.invitations().map(\.id) == [invitation.id])
            let mail = try await h.invitationMail(to: guestEmail)
            let link = try #require(mail.link.flatMap(URL.init(string:)))
            #expect(Companies.invitationToken(in: link) == mail.token)
            await #expect(throws: GatehouseError.self) {
                try await owner.client.companies.resendInvitation(id: invitation.id)
            }

            let received = try await guest.client.companies.myInvitations()
            #expect(received.map(\.companyName) == ["Invite Ltd"])
            #expect(received.first?.role == .readOnly)
            let joined = try await guest.client.companies.acceptInvitation(try #require(mail.code))
            #expect(joined.id == company.id && joined.role == .readOnly)
            #expect(try await guest.client.companies.list().map(\.id) == [company.id])
            let twice = await #expect(throws: GatehouseError.self) {
                try await guest.client.companies.acceptInvitation(invitation.id)
            }
            #expect(twice?.code == .invitationUsed)
            #expect(try await owner.client.companies.invitations().first?.state == .accepted)

            // A second invitation, to an address without an account: revoked; a third declined by its invitee.
            let other = try await owner.client.companies.invite(email: AccountHarness.newEmail("nobody"))
            try await owner.client.companies.revokeInvitation(id: other.id)
            #expect(try await owner.client.companies.invitations().first { $0.id == other.id }?.state == .revoked)
            let third = try AppDevice(h)
            let thirdEmail = try await third.signUp(h, "third")
            let declined = try await owner.client.companies.invite(email: thirdEmail)
            let mismatch = await #expect(throws: GatehouseError.self) {
                try await guest.client.companies.acceptInvitation(declined.id)
            }
            #expect(mismatch?.code == .invitationEmailMismatch)
            try await third.client.companies.declineInvitation(declined.id)
            #expect(try await third.client.companies.myInvitations().isEmpty)
            #expect(try await third.client.companies.list().isEmpty)
        }
    }
}
