import Foundation
import HTTPTypes
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

/// The live stream of a company (`GET /v1/companies/{cid}/sync/live`), read as it arrives and decoded with
/// OpenAPIRuntime's server-sent-events decoder. It goes through the client's middlewares (the bearer, the API
/// version, refusals typed as `GatehouseError`, the app's own) and the client's transport, so a transport an app or
/// a test hands the client answers the stream too. Without one, `LiveStreamTransport` reads it over URLSession.
struct LiveEvents: Sendable {
    /// The server, the client's middlewares and the transport the stream goes through.
    let caller: RawCaller

    /// Whether the stream is read only up to its first event, and opened again every `pollInterval`.
    ///
    /// So it is over URLSession on Linux: swift-corelibs-foundation's URLSession asks libcurl's multi interface for
    /// each transfer's socket readiness, and for a response that is waiting for data (7.88, Debian 12) it registers
    /// the socket for writing too; a connected socket is always writable, so the process wakes, finds nothing to read
    /// and re-arms, about 60,000 times a second (strace: epoll_wait, poll, eventfd write per turn), a core per open
    /// stream. There, `pokes` ends after the stream's first event (the company's current seq, sent at once) and the
    /// store asks again every `pollInterval`: a change arrives within that, and an idle store costs a request a second.
    let firstEventOnly: Bool

    /// How long a store waits before opening a stream that ended after its first event again.
    let pollInterval: Duration

    init(caller: RawCaller, firstEventOnly: Bool, pollInterval: Duration = .seconds(1)) {
        self.caller = caller
        self.firstEventOnly = firstEventOnly
        self.pollInterval = pollInterval
    }

    /// Whether a stream over URLSession is read only up to its first event (on Linux; see `firstEventOnly`).
    static var urlSessionReadsFirstEventOnly: Bool {
        #if canImport(FoundationNetworking)
            true
        #else
            false
        #endif
    }

    /// The pokes of `companyID` for the bearer `token`, until the server or the caller ends the stream.
    func pokes(companyID: String, token: String) -> AsyncThrowingStream<LivePoke, any Error> {
        let request = HTTPRequest(
            method: .get, scheme: nil, authority: nil, path: "/v1/companies/\(companyID)/sync/live",
            headerFields: [.accept: "text/event-stream"])
        let (caller, firstEventOnly) = (caller, firstEventOnly)
        return AsyncThrowingStream { continuation in
            let reader = Task {
                do {
                    let (_, answer) = try await Bearer.$current.withValue(token) {
                        try await caller.send(request, body: nil, operationID: "syncLive")
                    }
                    guard let answer else { return continuation.finish() }
                    events: for try await event in answer.asDecodedServerSentEvents() {
                        guard let data = event.data?.data(using: .utf8) else { continue }
                        switch event.event {
                        case "seq":
                            if let seq = try? JSONDecoder().decode(SeqData.self, from: data).seq {
                                continuation.yield(.seq(seq))
                                if firstEventOnly { break events }
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
            // Ending the reader ends the body's iteration, which ends the request.
            continuation.onTermination = { _ in reader.cancel() }
        }
    }

    private struct SeqData: Decodable { let seq: Int64 }
    private struct ClosedData: Decodable { let code: String }
}

/// The live stream over URLSession, for a client built without a transport of its own: swift-openapi-urlsession's
/// transport buffers whole bodies on Linux, and a stream's body never ends, so this one hands the body over as a data
/// delegate receives it. The request is cancelled when the body's reader stops.
struct LiveStreamTransport: ClientTransport {
    func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws
        -> (HTTPResponse, HTTPBody?)
    {
        var address = baseURL.absoluteString
        if address.hasSuffix("/") { address.removeLast() }
        guard let url = URL(string: address + (request.path ?? "/")) else {
            throw GatehouseError.network("Not a URL: \(address)\(request.path ?? "")")
        }
        var urlRequest = URLRequest(url: url)
        urlRequest.httpMethod = request.method.rawValue
        for field in request.headerFields { urlRequest.addValue(field.value, forHTTPHeaderField: field.name.rawName) }
        urlRequest.timeoutInterval = 3600
        if let body { urlRequest.httpBody = try await Data(collecting: body, upTo: 1 << 20) }

        let (bytes, feed) = AsyncThrowingStream.makeStream(of: ArraySlice<UInt8>.self)
        let delegate = StreamDelegate(feed: feed)
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        // Without a URL cache: cancelling a task of a cached session can trap on Linux (`URLSession.gatehouse`).
        let session = URLSession(configuration: .uncached, delegate: delegate, delegateQueue: queue)
        let task = session.dataTask(with: urlRequest)
        feed.onTermination = { _ in
            task.cancel()
            session.invalidateAndCancel()
        }
        let response = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                delegate.onResponse(continuation)
                task.resume()
            }
        } onCancel: {
            task.cancel()
        }
        return (response, HTTPBody(bytes, length: .unknown, iterationBehavior: .single))
    }
}

/// Hands over a response's head once it arrives, and feeds its bytes to a stream as they do.
private final class StreamDelegate: NSObject, URLSessionDataDelegate, Sendable {
    private let feed: AsyncThrowingStream<ArraySlice<UInt8>, any Error>.Continuation
    /// Who waits for the response's head, until it arrives or the request fails.
    private let waiting = Locked<CheckedContinuation<HTTPResponse, any Error>?>(nil)

    init(feed: AsyncThrowingStream<ArraySlice<UInt8>, any Error>.Continuation) { self.feed = feed }

    func onResponse(_ continuation: CheckedContinuation<HTTPResponse, any Error>) {
        waiting.withLock { $0 = continuation }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        var head = HTTPResponse(status: .ok)
        if let http = response as? HTTPURLResponse {
            head.status = HTTPResponse.Status(code: http.statusCode)
            for (name, value) in http.allHeaderFields {
                guard let name = name as? String, let field = HTTPField.Name(name), let value = value as? String
                else { continue }
                head.headerFields.append(HTTPField(name: field, value: value))
            }
        }
        waiting.withLock { waiting in
            waiting?.resume(returning: head)
            waiting = nil
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        feed.yield(ArraySlice(data))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let failure = error.map { GatehouseError.network($0.localizedDescription) }
        let waited = waiting.withLock { waiting in
            defer { waiting = nil }
            return waiting
        }
        if let waited {
            waited.resume(throwing: failure ?? GatehouseError.network("The server sent no answer"))
        }
        feed.finish(throwing: failure)
        session.finishTasksAndInvalidate()
    }
}
