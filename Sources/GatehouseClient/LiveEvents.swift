import Foundation
import OpenAPIRuntime

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A poke from a company's live stream.
enum LivePoke: Sendable, Equatable {
    /// The company's log reached this seq.
    case seq(Int64)
    /// The server closed the stream: the session ended or the member's access changed.
    case closed(code: String)
}

/// The live stream of a company (`GET /v1/companies/{cid}/sync/live`), read as it arrives. The generated client's
/// URLSession transport buffers whole bodies on Linux, so this reads the stream through a data delegate and decodes
/// it with OpenAPIRuntime's server-sent-events decoder.
///
/// On Linux the stream is not held open: swift-corelibs-foundation's URLSession asks libcurl's multi interface for
/// each transfer's socket readiness, and for a response that is waiting for data (7.88, Debian 12) it registers the
/// socket for writing too; a connected socket is always writable, so the process wakes, finds nothing to read and
/// re-arms, about 60,000 times a second (strace: epoll_wait, poll, eventfd write per turn), a core per open stream.
/// There, `pokes` ends after the stream's first event (the company's current seq, sent at once) and the store asks
/// again every `pollInterval`: a change arrives within that, and an idle store costs a request a second.
struct LiveEvents: Sendable {
    let url: URL

    /// Whether the stream is read once per connection, and how often it is opened again.
    #if canImport(FoundationNetworking)
        static let firstEventOnly = true
    #else
        static let firstEventOnly = false
    #endif

    /// How long a store waits before opening a stream that ended after its first event again.
    let pollInterval: Duration

    init(url: URL, pollInterval: Duration = .seconds(1)) {
        self.url = url
        self.pollInterval = pollInterval
    }

    /// The pokes of `companyID` for the bearer `token`, until the server or the caller ends the stream.
    func pokes(companyID: String, token: String) -> AsyncThrowingStream<LivePoke, any Error> {
        var request = URLRequest(url: url.appendingPathComponent("v1/companies/\(companyID)/sync/live"))
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue("text/event-stream", forHTTPHeaderField: "Accept")
        request.setValue(
            GatehouseMiddleware.apiVersionValue, forHTTPHeaderField: GatehouseMiddleware.apiVersion.rawName)
        request.timeoutInterval = 3600
        let (bytes, feed) = AsyncThrowingStream.makeStream(of: ArraySlice<UInt8>.self)
        let delegate = StreamDelegate(feed: feed)
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        // Without a URL cache: cancelling a task of a cached session can trap on Linux (`URLSession.gatehouse`).
        let session = URLSession(configuration: .uncached, delegate: delegate, delegateQueue: queue)
        let task = session.dataTask(with: request)
        task.resume()
        let body = HTTPBody(bytes, length: .unknown, iterationBehavior: .single)
        return AsyncThrowingStream { continuation in
            let reader = Task {
                do {
                    events: for try await event in body.asDecodedServerSentEvents() {
                        guard let data = event.data?.data(using: .utf8) else { continue }
                        switch event.event {
                        case "seq":
                            if let seq = try? JSONDecoder().decode(SeqData.self, from: data).seq {
                                continuation.yield(.seq(seq))
                                if Self.firstEventOnly { break events }
                            }
                        case "closed":
                            let code = (try? JSONDecoder().decode(ClosedData.self, from: data).code) ?? "closed"
                            continuation.yield(.closed(code: code))
                        default: break
                        }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in
                reader.cancel()
                task.cancel()
                session.invalidateAndCancel()
            }
        }
    }

    private struct SeqData: Decodable { let seq: Int64 }
    private struct ClosedData: Decodable { let code: String }
}

/// Feeds a response's bytes to a stream as they arrive; an error answer ends it with the typed error.
private final class StreamDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // Touched only on the session's serial delegate queue.
    private let feed: AsyncThrowingStream<ArraySlice<UInt8>, any Error>.Continuation
    private var failure: (status: Int, body: Data, retryAfter: String?)?

    init(feed: AsyncThrowingStream<ArraySlice<UInt8>, any Error>.Continuation) { self.feed = feed }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        if let http = response as? HTTPURLResponse, http.statusCode >= 400 {
            failure = (http.statusCode, Data(), http.value(forHTTPHeaderField: "Retry-After"))
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        if failure != nil {
            failure?.body.append(data)
        } else {
            feed.yield(ArraySlice(data))
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        if let failure {
            feed.finish(
                throwing: ErrorBody.error(status: failure.status, body: failure.body, retryAfter: failure.retryAfter))
        } else if let error {
            feed.finish(throwing: GatehouseError.network(error.localizedDescription))
        } else {
            feed.finish()
        }
        session.finishTasksAndInvalidate()
    }
}
