import GatehouseAPI

extension API {
    // MARK: Sync (a session logged in to the company)

    /// Sent and answered as JSON, this has a fast path: `FastPath.pullPage` (`SyncFastPaths.swift`).
    func syncPull(_ input: Operations.SyncPull.Input) async throws -> Operations.SyncPull.Output {
        let caller = try await access.company(input.path.cid)
        switch input.body {
        case .json(let body): return .ok(.init(body: .json(try await sync.pull(body, by: caller))))
        }
    }

    func syncPush(_ input: Operations.SyncPush.Input) async throws -> Operations.SyncPush.Output {
        let caller = try await access.company(input.path.cid)
        switch input.body {
        case .json(let body): return .ok(.init(body: .json(try await sync.push(body, by: caller))))
        }
    }

    func syncDigest(_ input: Operations.SyncDigest.Input) async throws -> Operations.SyncDigest.Output {
        let caller = try await access.company(input.path.cid)
        switch input.body {
        case .json(let body): return .ok(.init(body: .json(try await sync.digest(body, by: caller))))
        }
    }

    func syncLive(_ input: Operations.SyncLive.Input) async throws -> Operations.SyncLive.Output {
        let caller = try await access.company(input.path.cid)
        return .ok(.init(body: .textEventStream(try await sync.live(caller))))
    }

    // MARK: Records, for services

    /// Answered as JSON, with a plain query, this has a fast path: `FastPath.recordList` (`SyncFastPaths.swift`).
    func listRecords(_ input: Operations.ListRecords.Input) async throws -> Operations.ListRecords.Output {
        let caller = try await access.company(input.path.cid)
        let query = input.query
        let page = try await sync.list(caller, type: query._type, after: query.after, limit: query.limit)
        return .ok(.init(body: .json(page)))
    }

    func getRecord(_ input: Operations.GetRecord.Input) async throws -> Operations.GetRecord.Output {
        let caller = try await access.company(input.path.cid)
        return .ok(.init(body: .json(try await sync.record(input.path.id, caller: caller))))
    }
}
