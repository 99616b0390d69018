import Foundation
import GatehouseAPI
import NIOConcurrencyHelpers
import OpenAPIRuntime
import ServiceLifecycle

extension SyncService {
    /// A server-sent event stream of pokes for one device: the company's current seq first (read after subscribing,
    /// so nothing committed later is missed), then the newest seq after commits. Every `liveCheckInterval` it re-checks
    /// the session, the membership and the access epoch, and repeats the current seq as a keep-alive; it closes with a
    /// reason when any of them ended or changed. Per stream: the hub's buffer of one event and one sleeping task.
    func live(_ caller: CompanyCaller) async throws -> HTTPBody {
        let hub = bus.hub
        let cid = caller.companyID
        // The check task, and whether the stream already ended (it may end before the task is made).
        let watch = NIOLockedValueBox<(task: Task<Void, Never>?, ended: Bool)>((nil, false))
        let (subscription, events) = hub.subscribe(
            companyID: cid, accountID: caller.accountID, sessionID: caller.identity.sessionID
        ) {
            watch.withLockedValue {
                $0.ended = true
                $0.task?.cancel()
            }
        }
        let sync = SyncRepository(db: store.database)
        let current: Int64
        let epoch: Int64
        do {
            current = try await Self.counters(cid, in: sync).seq
            guard let access = try await sync.access(cid, accountID: caller.accountID) else { throw Access.notMember }
            epoch = access.epoch
        } catch {
            hub.unsubscribe(companyID: cid, id: subscription)
            throw error
        }
        hub.poke(companyID: cid, id: subscription, atLeast: current)
        watch.withLockedValue {
            guard !$0.ended else { return }
            $0.task = Task { [self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: liveCheckInterval)
                    guard !Task.isCancelled else { return }
                    if let reason = await ended(caller, epoch: epoch) {
                        hub.close(companyID: cid, id: subscription, code: reason)
                        return
                    }
                    hub.poke(companyID: cid, id: subscription, atLeast: current)
                }
            }
        }
        // A server shutting down ends its streams (devices reconnect to another instance) instead of waiting on them.
        return HTTPBody(
            events.cancelOnGracefulShutdown().map(Self.event), length: .unknown, iterationBehavior: .single)
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
