import Foundation
import GatehouseAPI
import OpenAPIRuntime

extension SyncService {
    /// A server-sent event stream of pokes for one device: the company's current seq first (read after subscribing,
    /// so nothing committed later is missed), then the newest seq after commits. Every `liveCheckInterval` it re-checks
    /// the session, the membership and the access epoch, and sends a keep-alive comment; it closes with a reason when
    /// any of them ended or changed.
    func live(_ caller: CompanyCaller) async throws -> HTTPBody {
        let hub = bus.hub
        let cid = caller.companyID
        let (subscription, events) = hub.subscribe(
            companyID: cid, accountID: caller.accountID, sessionID: caller.identity.sessionID)
        let sync = SyncRepository(db: store.database)
        let current: Int64
        let epoch: Int64
        do {
            current = try await sync.counters(cid).seq
            epoch = try await sync.access(cid, accountID: caller.accountID).epoch
        } catch {
            hub.unsubscribe(companyID: cid, id: subscription)
            throw error
        }
        let (output, continuation) = AsyncStream.makeStream(of: ArraySlice<UInt8>.self)
        continuation.yield(Self.event(.seq(current)))
        let pump = Task {
            var sent = current
            for await event in events {
                switch event {
                case .seq(let seq):
                    guard seq > sent else { continue }
                    sent = seq
                    continuation.yield(Self.event(event))
                case .closed:
                    continuation.yield(Self.event(event))
                }
            }
            continuation.finish()
        }
        let watch = Task { [self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: liveCheckInterval)
                guard !Task.isCancelled else { return }
                if let reason = await ended(caller, epoch: epoch) {
                    hub.close(companyID: cid, id: subscription, code: reason)
                    return
                }
                continuation.yield(Self.keepAlive)
            }
        }
        continuation.onTermination = { _ in
            pump.cancel()
            watch.cancel()
            hub.unsubscribe(companyID: cid, id: subscription)
        }
        return HTTPBody(output, length: .unknown, iterationBehavior: .single)
    }

    /// Why the stream must end, or nil while the session, membership and access epoch stand.
    private func ended(_ caller: CompanyCaller, epoch: Int64) async -> ErrorCode? {
        do {
            guard
                try await sessions.liveSession(caller.identity.sessionID, now: clock.now, db: store.database) != nil
            else { return .sessionNotFound }
            guard
                try await CompanyRepository(db: store.database).membership(
                    caller.companyID, accountID: caller.accountID) != nil,
                try await SyncRepository(db: store.database).access(caller.companyID, accountID: caller.accountID)
                    .epoch == epoch
            else { return .companyAccessRevoked }
            return nil
        } catch {
            // A store that cannot answer now is no verdict: the next check asks again.
            return nil
        }
    }

    private static let keepAlive = ArraySlice(": keep-alive\n\n".utf8)

    static func event(_ event: LiveEvent) -> ArraySlice<UInt8> {
        switch event {
        case .seq(let seq): ArraySlice("event: seq\ndata: {\"seq\":\(seq)}\n\n".utf8)
        case .closed(let code): ArraySlice("event: closed\ndata: {\"code\":\"\(code.rawValue)\"}\n\n".utf8)
        }
    }
}
