import Foundation

extension GatehouseClient {
    /// Opens (or makes) the local store of `companyID`'s records, its own database in `directory`, without syncing:
    /// subscribe to its `events` and observe its records first, then call `sync(progress:)` to bring it up to date
    /// and `startSyncing()` to keep it so while this client is logged in to the company. Open one per company and
    /// keep it while the company is in use.
    ///
    /// `pageSize` is how many records a pulled page holds at most (1 to 5000): smaller pages report a first sync's
    /// progress more often.
    public func openCompanyStore(companyID: String, directory: URL, pageSize: Int = 1000)
        async throws(GatehouseError) -> CompanyStore
    {
        try await CompanyStore(companyID: companyID, directory: directory, client: self, pageSize: pageSize)
    }
}
