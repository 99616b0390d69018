/// The background: the sync engine that runs after each wake, the live stream that wakes it, and the watch on the
/// client's sessions that starts it or wipes the store.
///
/// A wake syncs only when there is something to sync: changes saved here, a seq announced past what the store holds,
/// or a reason to ask the server (the start, a login, a retry, a closed stream). The live stream announces the current
/// seq when it connects and the seq of every commit, this device's own pushes included; each of those used to run a
/// sync of its own after the one that had already brought the change, so `synced` arrived two or three times.
extension CompanyStore {
    /// Syncs after each wake that calls for it, retrying with backoff while the network fails. A session that ended
    /// or an access change is checked against the account's company list: out of the company, the store is wiped.
    func runEngine(_ wakeStream: AsyncStream<Void>) async {
        var delay = gatehouse.retryBase
        for await _ in wakeStream {
            guard needsSync() else { continue }
            do throws(GatehouseError) {
                try await sync()
                delay = gatehouse.retryBase
            } catch .companyAccessRevoked {
                return  // wiped
            } catch {
                broadcast.send(.syncFailed(error))
                // Unreachable: try again with backoff. Otherwise a company login (or switch back) wakes this again.
                guard case .network = error else { continue }
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, gatehouse.retryMax)
                mustSync = true
                wakes.yield()
            }
        }
    }

    /// Whether a wake calls for a sync: one is due, changes wait to go up, or the live stream announced a seq past
    /// the one the store holds everything up to.
    private func needsSync() -> Bool {
        if mustSync { return true }
        // A store that cannot be read says why in the sync.
        guard let pending = try? local({ try $0.pendingCount() }) else { return true }
        if pending > 0 { return true }
        guard let announced else { return false }
        return announced > (syncedThrough ?? -1)
    }

    /// Keeps the live stream open while the client is logged in to this company (over URLSession on Linux, opens it
    /// every second for its first event: see `LiveEvents`); each new seq wakes the sync.
    func runLive(_ liveStream: AsyncStream<Void>) async {
        var delay = gatehouse.retryBase
        for await _ in liveStream {
            while !Task.isCancelled {
                let sessions = gatehouse.auth.companySessions
                guard await sessions.current?.companyID == companyID,
                    let token = try? await sessions.valid().accessToken
                else { break }
                do {
                    for try await poke in gatehouse.live.pokes(companyID: companyID, token: token) {
                        delay = gatehouse.retryBase
                        switch poke {
                        case .seq(let seq):
                            // The keep-alive repeats the seq it announced last.
                            guard seq != announced else { continue }
                            // A seq below what the store holds: the server's log went back (a restore); ask it.
                            if let syncedThrough, seq < syncedThrough { mustSync = true }
                            announced = seq
                            wakes.yield()
                        case .closed:
                            mustSync = true
                            wakes.yield()
                        }
                    }
                    if gatehouse.live.firstEventOnly {
                        // URLSession on Linux: the stream ended after its first event by design (LiveEvents); ask
                        // again soon.
                        try? await Task.sleep(for: gatehouse.live.pollInterval)
                        continue
                    }
                } catch {
                    // The stream failed: the sync says why (offline, session ended, removed).
                    mustSync = true
                    wakes.yield()
                }
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, gatehouse.retryMax)
            }
        }
    }

    /// Follows the client's sessions: a login to this company syncs (once syncing started), a removal from it wipes
    /// the store.
    func watch(_ events: AsyncStream<AuthEvent>) async {
        for await event in events {
            switch event {
            case .companyChanged(companyID: companyID):
                guard isSyncing else { continue }
                mustSync = true
                wakes.yield()
                liveWakes.yield()
            case .companyAccessRevoked(companyID: companyID):
                wipe()
            default: break
            }
        }
    }
}
