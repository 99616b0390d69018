import Crypto
import Foundation
import GatehouseAPI
import OpenAPIRuntime
import SQLKit

/// Company records and their sync (docs/api.md, "Company records that sync"): pull from a change token, push with a per-field merge, the digest
/// exchange for tokens older than the retained log, reads for services, and the live stream of pokes.
struct SyncService: Sendable {
    let store: Store
    let clock: any GatehouseClock
    let secrets: ServerSecrets
    let sessions: SessionService
    let bus: InstanceBus
    /// How often a live stream re-checks its session and repeats the current seq as a keep-alive.
    let liveCheckInterval: Duration
    /// Told of every push that changed records, in its transaction (webhooks' `records.changed`).
    var recordsChanged: @Sendable (RecordChanges, any SQLDatabase) async throws -> Void = { _, _ in }

    /// What one push changed in one company: counts, and the records as written.
    struct RecordChanges: Sendable {
        let companyID: String
        let accountID: String
        let seq: Int64
        var created = 0
        var updated = 0
        var deleted = 0
        var records: [StoredRecord] = []
    }

    static let defaultPageSize = 500
    /// A page of a pull, a record list or a digest chunk stops adding records past this many bytes of fields (but
    /// always holds one record, and a pull one whole transaction). The store is asked for the rows' keys and sizes
    /// first, and then for the fields of the rows that fit only.
    static let pageBytes = 4 << 20
    static let digestPageSize = 1000

    static let invalidToken = APIError(
        .badRequest, code: .invalidSyncToken, message: "The sync token was not issued for this company")
    static let resyncRequired = APIError(
        .gone, code: .resyncRequired,
        message: "The token is older than the retained change log; run the digest exchange (POST …/sync/digest)")

    static let noSuchCompany = APIError.notFound("No such company")

    /// The company's counters; a company deleted while the request ran answers 404.
    static func counters(_ companyID: String, in sync: SyncRepository) async throws -> SyncCounters {
        guard let counters = try await sync.counters(companyID) else { throw noSuchCompany }
        return counters
    }

    /// What the caller may see and write, and the access epoch it was read at.
    private struct View {
        let actor: SyncActor
        let epoch: Int64
        var mask: Int64 { actor.visibility.mask }
    }

    private func view(_ caller: CompanyCaller) async throws -> View {
        guard
            let access = try await SyncRepository(db: store.database).access(
                caller.companyID, accountID: caller.accountID)
        else { throw Access.notMember }
        return View(actor: SyncActor(membership: caller.membership, superUser: access.superUser), epoch: access.epoch)
    }

    private func tokenKey() async throws -> SymmetricKey { try await secrets.key("sync_token") }

    /// The record types a device syncs, sorted without repeats; nil for all.
    static func types(_ raw: [String]?) throws -> [String]? {
        guard let raw, !raw.isEmpty else { return nil }
        guard raw.count <= 50, raw.allSatisfy(SyncRules.isValidName) else {
            throw APIError.validation("types holds at most 50 record types, each a valid type name")
        }
        return Array(Set(raw)).sorted()
    }

    private func token(_ text: String?, for caller: CompanyCaller, key: SymmetricKey) throws -> SyncToken? {
        guard let text else { return nil }
        guard let token = SyncToken.decode(text, key: key), token.belongs(to: caller.membership) else {
            throw Self.invalidToken
        }
        return token
    }

    // MARK: Pull

    /// The changes after the token: a page of whole transactions, or, after the member's masks changed, first the
    /// re-filtering of what the device holds.
    func pull(_ body: Schemas.SyncPullRequest, by caller: CompanyCaller) async throws -> Schemas.SyncPullResponse {
        try await pullPage(body, by: caller).wire()
    }

    /// The page `pull` answers, with the fields of records sent whole still as stored (`SyncPage.json()`).
    func pullPage(_ body: Schemas.SyncPullRequest, by caller: CompanyCaller) async throws -> SyncPage {
        let limit = body.limit ?? Self.defaultPageSize
        guard (1...5000).contains(limit) else { throw APIError.validation("limit must be 1 to 5000") }
        let key = try await tokenKey()
        let view = try await view(caller)
        let sync = SyncRepository(db: store.database)
        // Read before the page: the token never claims a seq whose rows the page did not see.
        let counters = try await Self.counters(caller.companyID, in: sync)
        let types = try Self.types(body.types)
        let sent = try token(body.token, for: caller, key: key)
        let token =
            sent
            ?? SyncToken(
                company: caller.companyID, account: caller.accountID, seq: 0, epoch: view.epoch, mask: view.mask,
                types: types)
        // A token covers the types it was issued for; another set needs its own first sync.
        guard token.types == types else {
            throw APIError(
                .badRequest, code: .invalidSyncToken, message: "The sync token was issued for another set of types")
        }
        // A device holding data (any token) needs every tombstone since its seq.
        if sent != nil, token.seq < counters.compacted || token.seq > counters.seq { throw Self.resyncRequired }
        let page: SyncPage
        if token.mask != view.mask || token.rescope != nil {
            page = try await rescope(token, view: view, limit: limit, key: key, sync: sync)
        } else {
            page = try await changes(after: token, view: view, seq: counters.seq, limit: limit, key: key, sync: sync)
        }
        // Compaction may have committed meanwhile: a page read past its horizon could lack tombstones.
        if sent != nil, try await Self.counters(caller.companyID, in: sync).compacted > token.seq {
            throw Self.resyncRequired
        }
        return page
    }

    private func changes(
        after token: SyncToken, view: View, seq current: Int64, limit: Int, key: SymmetricKey, sync: SyncRepository
    ) async throws -> SyncPage {
        let keys = try await sync.changeKeys(
            token.company, since: token.seq, mask: view.mask, types: token.types, limit: limit + 1)
        let reached: Int64
        let hasMore: Bool
        let fitting = SyncRules.rowsWithin(Self.pageBytes, sizes: keys.map(\.size), limit: limit)
        switch SyncRules.pageEnd(keys.map(\.seq), limit: fitting) {
        case .all:
            (reached, hasMore) = (max(current, keys.last?.seq ?? 0), false)
        case .prefix(let count):
            (reached, hasMore) = (keys[count - 1].seq, true)
        case .wholeTransaction(let seq):
            (reached, hasMore) = (seq, true)
        }
        // The page ends on a transaction boundary, so it is every row of the seqs up to where it reached (and the keys'
        // rows that a write moved past it meanwhile: the token claims their earlier writes).
        let first = keys.first?.seq ?? reached
        let page =
            keys.isEmpty || first > reached
            ? []
            : try await sync.changes(
                token.company, since: token.seq, seqs: first...reached, keys: keys.prefix { $0.seq <= reached },
                mask: view.mask, types: token.types)
        var changes: [StoredRecord] = []
        var revoked: [String] = []
        for var record in page {
            // Only a record sent in part has its fields read; the others go out as stored.
            if !SyncRules.sendsWhole(record, since: token.seq) { try record.readFields() }
            switch SyncRules.pullItem(record, since: token.seq, visibility: view.actor.visibility) {
            case .change(let record): changes.append(record)
            case .revoked(let id): revoked.append(id)
            case .skip: break
            }
        }
        let next = SyncToken(
            company: token.company, account: token.account, seq: reached, epoch: view.epoch, mask: view.mask,
            types: token.types)
        return SyncPage(changes: changes, revoked: revoked, token: next.encoded(key: key), hasMore: hasMore)
    }

    /// After the member's masks changed: of the records that existed at the device's token, those it may no longer
    /// see are revoked (deleted ones too, in case the device still holds them) and those it now may see are sent
    /// whole, in pages; then the pull goes on from the same seq under the new mask. If the mask changes again before
    /// the re-filtering is done, the device's copy is mixed: it gets `410 resync_required` and the digest exchange.
    private func rescope(_ token: SyncToken, view: View, limit: Int, key: SymmetricKey, sync: SyncRepository)
        async throws -> SyncPage
    {
        if let progress = token.rescope, progress.target != view.mask { throw Self.resyncRequired }
        let position = token.rescope.map { ($0.seq, $0.id) } ?? (0, "")
        let keys = try await sync.rescopeKeys(
            token.company, createdBy: token.seq, old: token.mask, new: view.mask, types: token.types, after: position,
            limit: limit + 1)
        let taken = min(keys.count, SyncRules.rowsWithin(Self.pageBytes, sizes: keys.map(\.size), limit: limit))
        let last = taken > 0 ? keys[taken - 1] : nil
        let page = try await sync.rescope(
            token.company, createdBy: token.seq, old: token.mask, new: view.mask, types: token.types,
            after: position, keys: keys.prefix(taken))
        var changes: [StoredRecord] = []
        var revoked: [String] = []
        for record in page {
            if view.actor.visibility.sees(record.deptMask) {
                if !record.deleted { changes.append(record) }
            } else {
                revoked.append(record.id)
            }
        }
        var next = SyncToken(
            company: token.company, account: token.account, seq: token.seq, epoch: view.epoch, mask: view.mask,
            types: token.types)
        if keys.count > taken, let last {
            next = token.rescoping(to: view.mask, after: (last.seq, last.id))
        }
        return SyncPage(changes: changes, revoked: revoked, token: next.encoded(key: key), hasMore: true)
    }

    // MARK: Push

    /// Applies a batch in one transaction at one seq. A mutation already seen from this device returns its first
    /// result and applies nothing.
    func push(_ body: Schemas.SyncPushRequest, by caller: CompanyCaller) async throws -> Schemas.SyncPushResponse {
        guard (1...128).contains(body.clientId.utf8.count) else {
            throw APIError.validation("client_id must be 1 to 128 characters")
        }
        guard body.mutations.count <= SyncRules.maxMutations else {
            throw APIError(
                .badRequest, code: .tooManyMutations,
                message: "A push holds at most \(SyncRules.maxMutations) mutations")
        }
        guard body.mutations.allSatisfy({ (1...128).contains($0.mid.utf8.count) }) else {
            throw APIError.validation("mid must be 1 to 128 characters")
        }
        let view = try await view(caller)
        let mutations = body.mutations.map(Self.mutation)
        guard view.actor.canWrite else {
            // Nothing to write; mutations sent before the member became read-only still answer their first result.
            let sync = SyncRepository(db: store.database)
            let current = try await Self.counters(caller.companyID, in: sync).seq
            let earlier = try await sync.results(
                caller.companyID, accountID: caller.accountID, clientID: body.clientId, mids: mutations.map(\.mid))
            return .init(
                results: mutations.map {
                    Self.storedResult(earlier[$0.mid]) ?? Self.result($0, .refused(.readOnly), seq: current)
                }, visibleAt: current)
        }
        let now = clock.now
        let (results, committed) = try await store.transaction { [bus, recordsChanged] db in
            let sync = SyncRepository(db: db)
            guard let seq = try await sync.nextSeq(caller.companyID) else { throw Self.noSuchCompany }
            let earlier = try await sync.results(
                caller.companyID, accountID: caller.accountID, clientID: body.clientId, mids: mutations.map(\.mid))
            var records = try await sync.records(
                caller.companyID, ids: mutations.compactMap { SyncRules.recordID($0.id) })
            var changed: Set<String> = []
            var results: [Schemas.MutationResult] = []
            var answered: [String: Schemas.MutationResult] = [:]
            var fresh: [(mid: String, result: String)] = []
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            for mutation in mutations {
                if let first = answered[mutation.mid] ?? Self.storedResult(earlier[mutation.mid]) {
                    results.append(first)
                    answered[mutation.mid] = first
                    continue
                }
                let result: Schemas.MutationResult
                if let id = SyncRules.recordID(mutation.id) {
                    let current = records[id]
                    let written = Set(
                        current.map { record in
                            record.fieldSeqs.filter { $0.value == seq }.map(\.key)
                                + (record.maskSeq == seq ? [SyncRules.maskKey] : [])
                        } ?? [])
                    let (record, outcome) = SyncRules.apply(
                        mutation.normalized(id: id), to: current, by: view.actor, seq: seq, now: now,
                        batchWritten: written)
                    if let record {
                        records[id] = record
                        changed.insert(id)
                    }
                    // A record the member cannot see answers without its seq, as an id that does not exist would.
                    let shown = records[id].map { changed.contains(id) || view.actor.visibility.sees($0.deptMask) }
                    result = Self.result(
                        mutation.normalized(id: id), outcome, seq: shown == true ? records[id]?.seq ?? 0 : 0)
                } else {
                    result = Self.result(mutation, .refused(.invalidRecordId), seq: 0)
                }
                results.append(result)
                answered[mutation.mid] = result
                fresh.append((mutation.mid, String(decoding: try encoder.encode(result), as: UTF8.self)))
            }
            let saved = changed.compactMap { records[$0] }
            try await sync.save(caller.companyID, saved)
            if !saved.isEmpty {
                var told = RecordChanges(companyID: caller.companyID, accountID: caller.accountID, seq: seq)
                for record in saved {
                    if record.deleted {
                        told.deleted += 1
                    } else if record.createdSeq == seq {
                        told.created += 1
                    } else {
                        told.updated += 1
                    }
                }
                told.records = saved
                try await recordsChanged(told, db)
            }
            try await sync.saveResults(
                caller.companyID, accountID: caller.accountID, clientID: body.clientId, fresh, now: now)
            guard !changed.isEmpty else { return (results, Int64?.none) }
            try await bus.announce(.committed(companyID: caller.companyID, seq: seq), db: db)
            return (results, Int64?.some(seq))
        }
        if let committed { bus.deliver(.committed(companyID: caller.companyID, seq: committed)) }
        return .init(results: results, visibleAt: committed ?? results.map(\.seq).max() ?? 0)
    }

    private static func storedResult(_ text: String?) -> Schemas.MutationResult? {
        text.flatMap { try? JSONDecoder().decode(Schemas.MutationResult.self, from: Data($0.utf8)) }
    }

    private static func mutation(_ wire: Schemas.Mutation) -> RecordMutation {
        RecordMutation(
            mid: wire.mid, id: wire.id, type: wire._type, op: wire.op == .delete ? .delete : .upsert, base: wire.base,
            fields: wire.fields ?? [:], deptMask: wire.deptMask)
    }

    private static func result(_ mutation: RecordMutation, _ outcome: MutationOutcome, seq: Int64)
        -> Schemas.MutationResult
    {
        switch outcome {
        case .applied:
            return .init(mid: mutation.mid, id: mutation.id, status: .applied, seq: seq)
        case .merged(let rejected, let keptMask):
            return .init(
                mid: mutation.mid, id: mutation.id, status: .merged, rejectedFields: rejected, deptMask: keptMask,
                seq: seq)
        case .refused(let code):
            return .init(mid: mutation.mid, id: mutation.id, status: .refused, code: code.rawValue, seq: seq)
        }
    }

    // MARK: Digest exchange

    /// One chunk of the digest exchange: the device's ids and seqs in, the difference for that id range out.
    func digest(_ body: Schemas.SyncDigestRequest, by caller: CompanyCaller) async throws
        -> Schemas.SyncDigestResponse
    {
        guard body.known.count <= SyncRules.maxDigestEntries else {
            throw APIError(
                .badRequest, code: .tooManyMutations,
                message: "A digest chunk holds at most \(SyncRules.maxDigestEntries) ids")
        }
        let key = try await tokenKey()
        let view = try await view(caller)
        let types = try Self.types(body.types)
        let sync = SyncRepository(db: store.database)
        // The exchange covers the log up to where it began; the pull afterwards brings what came later.
        let start: Int64
        if let token = try token(body.token, for: caller, key: key) {
            guard token.types == types else { throw Self.invalidToken }
            start = token.seq
        } else {
            start = try await Self.counters(caller.companyID, in: sync).seq
        }
        var known: [String: Int64] = [:]
        for entry in body.known {
            guard let id = SyncRules.recordID(entry.id) else {
                throw APIError(.badRequest, code: .invalidRecordId, message: "known holds an id that is not a UUID")
            }
            known[id] = entry.seq
        }
        let after = body.after.flatMap(SyncRules.recordID)
        let upper = body.complete ? nil : known.keys.max()
        let keys = try await sync.existingKeys(
            caller.companyID, mask: view.mask, types: types, after: after, through: upper,
            limit: Self.digestPageSize + 1)
        // Only records the device lacks or holds older are sent, so only those count toward the page's bytes.
        let stale = keys.map { key in known[key.id].map { $0 < key.seq } ?? true }
        let processed = SyncRules.rowsWithin(
            Self.pageBytes, sizes: zip(keys, stale).map { $1 ? $0.size : 0 },
            limit: min(keys.count, Self.digestPageSize))
        let through = keys.count > processed ? keys[processed - 1].id : upper
        let onServer = Set(keys.prefix(processed).map(\.id))
        let sent = zip(keys, stale).prefix(processed).filter(\.1).map(\.0.id)
        let changes = try await Self.existing(sent, view: view, types: types, caller: caller, in: sync)
            .map(SyncPage.change)
        let revoked = known.keys.filter { id in
            (after.map { id > $0 } ?? true) && (through.map { id <= $0 } ?? true) && !onServer.contains(id)
        }.sorted()
        let next = SyncToken(
            company: caller.companyID, account: caller.accountID, seq: start, epoch: view.epoch, mask: view.mask,
            types: types)
        return .init(changes: changes, revoked: revoked, through: through, token: next.encoded(key: key))
    }

    // MARK: Reads for services

    func list(_ caller: CompanyCaller, type: String?, after: String?, limit: Int?) async throws -> Schemas.RecordPage {
        try await listPage(caller, type: type, after: after, limit: limit).wire()
    }

    /// The page `list` answers, with the records' fields still as stored (`RecordListPage.json()`).
    func listPage(_ caller: CompanyCaller, type: String?, after: String?, limit: Int?) async throws -> RecordListPage {
        let limit = limit ?? 100
        guard (1...1000).contains(limit) else { throw APIError.validation("limit must be 1 to 1000") }
        if let type, !SyncRules.isValidName(type) {
            throw APIError.validation("type must be 1 to 64 characters of [A-Za-z0-9_], starting with a letter")
        }
        let view = try await view(caller)
        let sync = SyncRepository(db: store.database)
        let types = type.map { [$0] }
        let keys = try await sync.existingKeys(
            caller.companyID, mask: view.mask, types: types, after: after?.lowercased(), limit: limit)
        let taken = min(keys.count, SyncRules.rowsWithin(Self.pageBytes, sizes: keys.map(\.size), limit: limit))
        let records = try await Self.existing(
            keys.prefix(taken).map(\.id), view: view, types: types, caller: caller, in: sync, readingFields: false)
        let more = taken < keys.count || keys.count == limit
        return RecordListPage(records: records, nextAfter: more ? keys.prefix(taken).last?.id : nil)
    }

    /// The records of `ids` that still exist and are visible (a write may have come between the keys and this read),
    /// by id.
    private static func existing(
        _ ids: [String], view: View, types: [String]?, caller: CompanyCaller, in sync: SyncRepository,
        readingFields: Bool = true
    ) async throws -> [StoredRecord] {
        guard !ids.isEmpty else { return [] }
        return try await sync.records(caller.companyID, ids: ids, readingFields: readingFields).values.filter {
            record in
            !record.deleted && view.actor.visibility.sees(record.deptMask)
                && (types.map { $0.contains(record.type) } ?? true)
        }.sorted { $0.id < $1.id }
    }

    func record(_ id: String, caller: CompanyCaller) async throws -> Schemas.RecordInfo {
        let view = try await view(caller)
        guard let id = SyncRules.recordID(id),
            let record = try await SyncRepository(db: store.database).records(caller.companyID, ids: [id])[id],
            !record.deleted, view.actor.visibility.sees(record.deptMask)
        else { throw APIError.notFound("No such record") }
        return Self.info(record)
    }

    static func info(_ record: StoredRecord) -> Schemas.RecordInfo {
        .init(
            id: record.id, _type: record.type, fields: record.fields, deptMask: record.deptMask, seq: record.seq,
            createdBy: record.createdBy, createdAt: record.createdAt, updatedAt: record.updatedAt)
    }

    // MARK: Retention

    /// Drops tombstones and mutation results older than `retention`; tokens from before get the digest exchange.
    @discardableResult
    func compact(retention: TimeInterval) async throws -> Int {
        let cutoff = clock.now.addingTimeInterval(-retention)
        return try await store.transaction { db in try await SyncRepository(db: db).compact(before: cutoff) }
    }
}

extension RecordMutation {
    /// The mutation with its record id in the stored spelling.
    func normalized(id: String) -> RecordMutation {
        RecordMutation(mid: mid, id: id, type: type, op: op, base: base, fields: fields, deptMask: deptMask)
    }
}
