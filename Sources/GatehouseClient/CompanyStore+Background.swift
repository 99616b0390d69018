/// The background: the sync engine that runs after each wake, the live stream that wakes it, and the watch on the
/// client's sessions that starts it or wipes the store.
extension CompanyStore {
    /// Syncs after each wake (saves, pokes, logins), retrying with backoff while the network fails. A session that
    /// ended or an access change is checked against the account's company list: out of the company, the store is
    /// wiped.
    func runEngine(_ wakeStream: AsyncStream<Void>) async {
        var delay = gatehouse.retryBase
        for await _ in wakeStream {
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
                wakes.yield()
            }
        }
    }

    /// Keeps the live stream open while the client is logged in to this company; each new seq wakes the sync.
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
                            if seq != announced {
                                announced = seq
                                wakes.yield()
                            }
                        case .closed:
                            wakes.yield()
                        }
                    }
                } catch {
                    wakes.yield()
                }
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, gatehouse.retryMax)
            }
        }
    }

    /// Follows the client's sessions: a login to this company starts syncing, a removal from it wipes the store.
    func watch(_ events: AsyncStream<AuthEvent>) async {
        for await event in events {
            switch event {
            case .companyChanged(companyID: companyID):
                wakes.yield()
                liveWakes.yield()
            case .companyAccessRevoked(companyID: companyID):
                wipe()
            default: break
            }
        }
    }
}
