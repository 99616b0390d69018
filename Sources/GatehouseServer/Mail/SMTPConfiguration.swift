/// Where and how to reach the SMTP server (the "smarthost") that delivers Gatehouse's mail.
public struct SMTPConfiguration: Sendable, Equatable {
    /// How the connection to the server is protected.
    public enum Security: String, Sendable, Equatable {
        /// Plain text throughout; credentials are then only sent to a loopback server.
        case none
        /// Upgrade with STARTTLS, and fail if the server does not offer it.
        case startTLS
        /// Upgrade with STARTTLS when the server offers it; continue in plain text only to a loopback server (a
        /// relay on the same machine), since anyone on a network path could otherwise strip the offer and read codes.
        case startTLSIfOffered
        /// TLS from the first byte (SMTPS, usually port 465).
        case implicitTLS
    }

    public var host: String
    public var port: Int
    public var security: Security
    public var username: String?
    public var password: String?
    /// The name this client gives itself in EHLO.
    public var heloName: String
    /// The longest any single step (connecting, or waiting for one reply) may take.
    public var timeout: Duration
    /// Whether the server's certificate must chain to the system's trust roots and match `host`; only tests turn
    /// this off.
    public var certificateVerification: Bool

    /// Makes a configuration; by default it upgrades to TLS when offered, on the submission port.
    public init(
        host: String,
        port: Int = 587,
        security: Security = .startTLSIfOffered,
        username: String? = nil,
        password: String? = nil,
        heloName: String = "gatehouse.local",
        timeout: Duration = .seconds(15),
        certificateVerification: Bool = true
    ) {
        self.host = host
        self.port = port
        self.security = security
        self.username = username
        self.password = password
        self.heloName = heloName
        self.timeout = timeout
        self.certificateVerification = certificateVerification
    }
}

extension SMTPConfiguration: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Names everything but the password, so the configuration can be logged or dumped safely.
    public var description: String {
        "SMTPConfiguration(host: \(host), port: \(port), security: \(security.rawValue), "
            + "username: \(username ?? "nil"), password: \(password == nil ? "nil" : "<redacted>"), "
            + "heloName: \(heloName), timeout: \(timeout), certificateVerification: \(certificateVerification))"
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "host": host, "port": port, "security": security, "username": username as Any,
                "password": password == nil ? "nil" : "<redacted>", "heloName": heloName, "timeout": timeout,
                "certificateVerification": certificateVerification,
            ])
    }
}
