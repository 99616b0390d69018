import Foundation
import GatehouseAPI
import NIOConcurrencyHelpers
import OpenAPIRuntime
import ServiceLifecycle

extension SyncService {
    /// A server-sent event stream of pokes for one device: the company's current seq first (read after subscribing,
    /// so nothing committed later is missed), then the newest seq after commits. It checks the session, the membership
    /// and the access epoch every `liveCheckInterval` (or when the session is due to expire, if sooner), and at once
    /// when a commit here or on another instance touched the account; it repeats the current seq as a keep-alive,
    /// and closes with a reason when any of them ended or changed. A session that ends closes its streams at once,
    /// on every instance (`LiveStreams.invalidated`). Per stream: the buffer of one event and one checking task.
    func live(_ caller: CompanyCaller) async throws -> HTTPBody {
        let streams = bus.streams
        let cid = caller.companyID
        // The check task, and whether the stream already ended (it may end before the task is made).
        let watch = NIOLockedValueBox<(task: Task<Void, Never>?, ended: Bool)>((nil, false))
        let (checks, checkNow) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let subscription: UUID
        let events: AsyncStream<LiveEvent>
        do {
            (subscription, events) = try streams.subscribe(
                companyID: cid, accountID: caller.accountID, sessionID: caller.identity.sessionID,
                recheck: { checkNow.yield() }
            ) {
                checkNow.finish()
                watch.withLockedValue {
                    $0.ended = true
                    $0.task?.cancel()
                }
            }
        } catch .sessionFull {
            throw APIError(
                .tooManyRequests, code: .tooManyStreams,
                message: "This session already holds \(streams.perSession) live streams, or its account "
                    + "\(streams.perAccount): close one first")
        } catch .instanceFull {
            throw APIError(
                .serviceUnavailable, code: .serverBusy,
                message: "This server holds as many live streams as it may: try again later",
                headers: [.retryAfter: "30"])
        }
        let sync = SyncRepository(db: store.database)
        let current: Int64
        let epoch: Int64
        let endsAt: Date
        do {
            current = try await Self.counters(cid, in: sync).seq
            guard let access = try await sync.access(cid, accountID: caller.accountID) else { throw Access.notMember }
            epoch = access.epoch
            // A session that ended after the request was authorized, before the streams could hear of it, ends here.
            guard
                let session = try await sessions.liveSession(
                    caller.identity.sessionID, now: clock.now, db: store.database)
            else { throw APIError.sessionNotFound }
            endsAt = Date(epochMilliseconds: session.endsAt)
        } catch {
            streams.unsubscribe(companyID: cid, id: subscription)
            throw error
        }
        streams.poke(companyID: cid, id: subscription, atLeast: current)
        watch.withLockedValue {
            guard !$0.ended else { return }
            $0.task = Task { [self] in
                await withTaskGroup(of: Void.self) { group in
                    // The timer: a check every interval, and one just after the session's lifetime ends if sooner.
                    group.addTask { [self] in
                        while !Task.isCancelled {
                            try? await Task.sleep(for: nextCheck(endsAt: endsAt))
                            checkNow.yield()
                        }
                    }
                    group.addTask { [self] in
                        for await _ in checks {
                            if let reason = await ended(caller, epoch: epoch) {
                                streams.close(companyID: cid, id: subscription, code: reason)
                                return
                            }
                            streams.poke(companyID: cid, id: subscription, atLeast: current)
                        }
                    }
                    await group.next()
                    group.cancelAll()
                }
            }
        }
        // A server shutting down ends its streams (devices reconnect to another instance) instead of waiting on them.
        return HTTPBody(
            events.cancelOnGracefulShutdown().map(Self.event), length: .unknown, iterationBehavior: .single)
    }

    /// How long until the next check: the interval, or less when the session's lifetime ends sooner.
    private func nextCheck(endsAt: Date) -> Duration {
        let left = endsAt.timeIntervalSince(clock.now)
        // Past it, the check closes the stream; a store that cannot say so yet is asked again each second.
        return min(liveCheckInterval, left > 0 ? .milliseconds(Int64(left * 1000) + 50) : .seconds(1))
    }

    /// Why the stream must end, or nil while the session, membership and access epoch stand.
    private func ended(_ caller: CompanyCaller, epoch: Int64) async -> ErrorCode? {
        do {
            // Access first: a removal also ends the session, and the device must hear it lost the company.
            guard
                let access = try await SyncRepository(db: store.database).access(
                    caller.companyID, accountID: caller.accountID),
                access.epoch == epoch
            else { return .companyAccessRevoked }
            guard
                try await sessions.liveSession(caller.identity.sessionID, now: clock.now, db: store.database) != nil
            else { return .sessionNotFound }
            return nil
        } catch {
            // A store that cannot answer now is no verdict: the next check asks again.
            return nil
        }
    }

    static func event(_ event: LiveEvent) -> ArraySlice<UInt8> {
        switch event {
        case .seq(let seq): ArraySlice("event: seq\ndata: {\"seq\":\(seq)}\n\n".utf8)
        case .closed(let code): ArraySlice("event: closed\ndata: {\"code\":\"\(code.rawValue)\"}\n\n".utf8)
        }
    }
}
