import Foundation
import GatehouseClientAPI

/// The push and pull: the saved changes go up in order, the server's come down by token (or by digest when the
/// token is older than the server's log), each page applied in one transaction.
///
/// Syncs run one at a time. A call arriving while one runs waits for the next, which every caller arriving before it
/// starts shares: one push and pull, one `synced` event, each caller's progress reported.
extension CompanyStore {
    /// Pushes every change saved before the call and pulls the server's until the store holds everything the server
    /// had, reporting `progress` after each batch pushed and each page pulled (on the store's executor: a view hops to
    /// the main actor); answers when done. The background sync (`startSyncing()`) does the same on its own after
    /// saves, live pokes and reconnects.
    /// A session that ended or an access change is checked against the account's company list: out of the company,
    /// the store is wiped (and `companyAccessRevoked` thrown).
    @discardableResult
    public func sync(progress: (@Sendable (SyncProgress) -> Void)? = nil) async throws(GatehouseError) -> SyncSummary {
        let (number, task) = nextSync()
        if let progress { listeners[number, default: []].append(progress) }
        do {
            return try await task.value
        } catch let error as GatehouseError {
            throw error
        } catch {
            throw .localStore(String(describing: error))
        }
    }

    /// The sync not started yet, made (after the last one) when there is none.
    private func nextSync() -> (number: Int, task: Task<SyncSummary, any Error>) {
        if let queued { return queued }
        runs += 1
        let number = runs
        let task = Task { [previous = tail] in
            _ = try? await previous?.value
            return try await self.run(number)
        }
        tail = task
        queued = (number, task)
        return (number, task)
    }

    /// One sync: from here on, callers wait for the next one.
    private func run(_ number: Int) async throws(GatehouseError) -> SyncSummary {
        if queued?.number == number { queued = nil }
        mustSync = false
        let tracker = SyncTracker(listeners: listeners.removeValue(forKey: number) ?? [], announced: announced)
        do {
            try await push(tracker)
            try await pull(tracker)
        } catch let error as GatehouseError {
            switch error {
            case .sessionExpired, .companyAccessRevoked:
                // A store closed (or wiped) meanwhile has nothing to ask the server.
                guard isOpen else { throw .companyAccessRevoked }
                guard try await gatehouse.companies.confirmMembership(companyID) else { throw .companyAccessRevoked }
                throw .notSignedIn
            default: throw error
            }
        } catch {
            throw .localStore(String(describing: error))
        }
        syncedThrough = max(syncedThrough ?? 0, tracker.through)
        broadcast.send(.synced)
        return tracker.summary
    }

    /// Sends the pending changes in order, in batches of up to 500. A batch over the server's body limit is halved
    /// until it fits; a single change too large for any batch is dropped with `refused(payload_too_large)`, so it
    /// never blocks the ones after it.
    private func push(_ tracker: SyncTracker) async throws {
        var limit = 500
        while true {
            let size = limit
            let batch = try local { try $0.pendingChanges(limit: size) }
            guard !batch.isEmpty else { return }
            let sent = Dictionary(batch.map { ($0.mid, $0) }) { $1 }
            let body = Components.Schemas.SyncPushRequest(clientId: clientID, mutations: batch.map(\.mutation))
            guard let answer = try await send(body) else {
                if batch.count > 1 {
                    limit = batch.count / 2
                } else if let change = batch.first {
                    try local { try $0.dropChange(mid: change.mid) }
                    broadcast.send(.refused(recordID: change.id, code: "payload_too_large"))
                }
                continue
            }
            let events = try local { try $0.confirm(answer.results, sent: sent) }
            for event in events { broadcast.send(event) }
            tracker.pushed(answer.results.map(\.seq))
        }
    }

    /// One push; nil when the batch is larger than the server's body limit.
    private func send(_ body: Components.Schemas.SyncPushRequest) async throws -> Components.Schemas.SyncPushResponse? {
        do {
            return try await inCompany { client, cid in
                try await client.syncPush(path: .init(cid: cid), body: .json(body)).ok.body.json
            }
        } catch let error {
            if error.code == "payload_too_large" { return nil }
            throw error
        }
    }

    /// Pulls pages until the server has no more. The next page is asked for as soon as a page's token is known, so
    /// the server writes it while this device stores the one before (a first sync of 100,000 records is 20 pages or
    /// more).
    private func pull(_ tracker: SyncTracker) async throws {
        var token = try local { try $0.token() }
        var next: Task<[UInt8], any Error>?
        defer { next?.cancel() }
        while true {
            let bytes: [UInt8]
            do {
                bytes = try await (next ?? fetch(after: token)).value
                next = nil
            } catch let error as GatehouseError {
                next = nil
                switch error.code {
                case "resync_required":
                    try await resync(tracker)
                    return
                case "invalid_sync_token":
                    // A token this member cannot use (another account's copy): start over.
                    try local { try $0.forgetServerCopy() }
                    token = nil
                    continue
                default: throw error
                }
            }
            // The server writes the next page while this one is read and stored.
            if let after = try PulledPage.next(in: bytes) { next = fetch(after: after) }
            let page = try PulledPage(json: bytes)
            try apply(page.changes, revoked: page.revoked, token: page.token)
            token = page.token
            tracker.received(page.changes, revoked: page.revoked, last: !page.hasMore)
            guard page.hasMore else { return }
        }
    }

    /// Asks for the page after `token`; its bytes are read without the generated decoding (`PulledPage`).
    private func fetch(after token: String?) -> Task<[UInt8], any Error> {
        let raw = gatehouse.raw
        return Task {
            let body = try JSONEncoder().encode(Components.Schemas.SyncPullRequest(token: token, limit: pageSize))
            return try await inCompany { _, cid in
                try await raw.post("/v1/companies/\(cid)/sync/pull", json: body, operationID: "syncPull")
            }
        }
    }

    /// The digest exchange, for a token older than the server's log: the device's ids and seqs go up in chunks, and
    /// what differs comes back.
    private func resync(_ tracker: SyncTracker) async throws {
        var token: String?
        var after: String?
        while true {
            let from = after ?? ""
            let known = try local { try $0.known(after: from, limit: 5000) }
            let body = Components.Schemas.SyncDigestRequest(
                token: token, after: after, known: known, complete: known.count < 5000)
            let answer = try await inCompany { client, cid in
                try await client.syncDigest(path: .init(cid: cid), body: .json(body)).ok.body.json
            }
            let changes = try answer.changes.map(PulledChange.init)
            try apply(changes, revoked: answer.revoked, token: answer.through == nil ? answer.token : nil)
            tracker.received(changes, revoked: answer.revoked, last: answer.through == nil)
            guard let through = answer.through else { return }
            token = answer.token
            after = through
        }
    }

    /// Applies a page of the server's changes in one transaction, with its token when given, and tells the UI.
    private func apply(_ changes: [PulledChange], revoked: [String], token: String?) throws {
        let changed = try local { try $0.apply(changes, revoked: revoked, token: token) }
        if !changed.isEmpty { broadcast.send(.changed(changed)) }
    }

    /// Runs a call in this company's session; an answer that the account is out of the company wipes the store.
    private func inCompany<T: Sendable>(
        _ body: @escaping @Sendable (Client, String) async throws -> T
    ) async throws(GatehouseError) -> T {
        let sessions = gatehouse.auth.companySessions
        guard await sessions.current?.companyID == companyID else { throw .notSignedIn }
        let cid = companyID
        return try await sessions.authorized { try await body($0, cid) }
    }
}

/// One sync's count, told to its callers as it goes: changes confirmed, records received, pages, and the highest seq
/// it saw (a seq the live stream announced before the sync started counts: the pull after it reached that far).
final class SyncTracker {
    private let listeners: [@Sendable (SyncProgress) -> Void]
    private var progress = SyncProgress()
    private(set) var through: Int64

    init(listeners: [@Sendable (SyncProgress) -> Void], announced: Int64?) {
        self.listeners = listeners
        through = announced ?? 0
    }

    var summary: SyncSummary {
        SyncSummary(pushed: progress.pushed, records: progress.records, pages: progress.pages)
    }

    /// A batch of changes the server confirmed, at these seqs.
    func pushed(_ seqs: [Int64]) {
        progress.pushed += seqs.count
        through = max(through, seqs.max() ?? 0)
        report()
    }

    /// A page pulled (or a digest chunk); `last` when the server has no more.
    func received(_ changes: [PulledChange], revoked: [String], last: Bool) {
        progress.pages += 1
        progress.records += changes.count + revoked.count
        if last { progress.total = progress.records }
        through = max(through, changes.map(\.seq).max() ?? 0)
        report()
    }

    private func report() {
        for listener in listeners { listener(progress) }
    }
}
