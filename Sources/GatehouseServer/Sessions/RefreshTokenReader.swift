/// The first reads of refreshes, made together: the tokens asked for while one read runs are read by the next, in one
/// statement (`SessionRepository.findByRefreshTokens`). Each refresh read its token alone before: a trip to SQLite's
/// threads and the statement prepared again, per request, which under load cost more than the rows.
final class RefreshTokenReader: Sendable {
    /// The most tokens in one statement.
    static let batchLimit = 128

    typealias Found = (token: RefreshTokenRow, session: SessionRow)

    private let batches: GroupCommit<String, Result<Found?, any Error>>

    init(store: Store) {
        batches = GroupCommit(limit: Self.batchLimit) { tokens in
            do {
                let found = try await SessionRepository(db: store.database).findByRefreshTokens(tokens)
                return tokens.map { .success(found[$0]) }
            } catch {
                return tokens.map { _ in .failure(error) }
            }
        }
    }

    /// `token`'s row and its session's, read with whatever else is asked for meanwhile.
    func find(_ token: String) async throws -> Found? {
        switch await batches.submit(token) {
        case .success(let found): return found
        case .failure(let error):
            // Read in the batch's own task: this request's report records an outage here.
            StoreOutage.currentRequest?.record(error)
            throw error
        }
    }
}
