import Foundation
import Hummingbird
import NIOCore

/// The context every request starts with: the body limit and who is on the other end of the socket.
public struct AppRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// Set from configuration by `BodyLimitMiddleware` before any handler decodes a body.
    public var maxUploadSize: Int = 1 << 20
    /// The peer's IP address, for rate limits and the audit trail.
    public let peerAddress: String?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        peerAddress = source.channel.remoteAddress?.ipAddress
    }
}
