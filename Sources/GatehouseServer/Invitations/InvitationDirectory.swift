import SQLKit

/// What another feature asks of invitations: a company's, as an operator reads them in the console. The small
/// interface Invitations exports, so that no feature reaches into `InvitationRepository`.
struct InvitationDirectory {
    private let invitations: InvitationRepository

    init(db: any SQLDatabase) { invitations = InvitationRepository(db: db) }

    /// The company's invitations, newest first, at most `limit`.
    func invitations(_ companyID: String, limit: Int) async throws -> [InvitationRecord] {
        try await invitations.invitations(companyID, limit: limit)
    }
}
