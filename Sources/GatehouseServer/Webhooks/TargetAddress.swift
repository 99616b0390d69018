import Foundation
import NIOCore

/// An IP address an outbound request would reach, and the range it falls in: the check against server-side request
/// forgery that webhook deliveries make on every address a name resolves to.
struct TargetAddress: Sendable, Equatable, CustomStringConvertible {
    /// The address's bytes: 4 for IPv4, 16 for IPv6.
    let bytes: [UInt8]

    enum Range: Sendable, Equatable {
        case loopback
        case linkLocal
        /// RFC 1918, unique local IPv6, carrier-grade NAT, and the rest no public receiver has (unspecified,
        /// multicast, reserved, documentation, benchmarking).
        case privateOrReserved
        case global
    }

    /// Parses a dotted IPv4 address or an IPv6 address (brackets allowed); nil for a name.
    init?(_ text: String) {
        let bare = text.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, bare, &v4) == 1 {
            bytes = withUnsafeBytes(of: v4) { Array($0) }
        } else if inet_pton(AF_INET6, bare, &v6) == 1 {
            bytes = withUnsafeBytes(of: v6) { Array($0) }
        } else {
            return nil
        }
    }

    init(socketAddress: SocketAddress) {
        switch socketAddress {
        case .v4(let address): bytes = withUnsafeBytes(of: address.address.sin_addr) { Array($0) }
        case .v6(let address): bytes = withUnsafeBytes(of: address.address.sin6_addr) { Array($0) }
        case .unixDomainSocket: bytes = [0, 0, 0, 0]
        }
    }

    var description: String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        return stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
            .joined(separator: ":")
    }

    var range: Range {
        if bytes.count == 4 { return Self.range(v4: bytes) }
        // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d) addresses are their IPv4 address.
        if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
            return Self.range(v4: Array(bytes[12...]))
        }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) { return bytes[15] == 1 ? .loopback : .privateOrReserved }
        if bytes[0..<12].allSatisfy({ $0 == 0 }) { return Self.range(v4: Array(bytes[12...])) }
        // NAT64 (64:ff9b::/96) reaches the IPv4 address it embeds.
        if bytes[0] == 0x00, bytes[1] == 0x64, bytes[2] == 0xff, bytes[3] == 0x9b {
            return Self.range(v4: Array(bytes[12...]))
        }
        if bytes[0] == 0xfe, bytes[1] & 0xc0 == 0x80 { return .linkLocal }
        if bytes[0] & 0xfe == 0xfc { return .privateOrReserved }  // fc00::/7
        if bytes[0] == 0xff { return .privateOrReserved }  // multicast
        if bytes[0] == 0x20, bytes[1] == 0x01, bytes[2] == 0x0d, bytes[3] == 0xb8 { return .privateOrReserved }
        if bytes[0] == 0xfe, bytes[1] & 0xc0 == 0xc0 { return .privateOrReserved }  // site-local, deprecated
        return .global
    }

    private static func range(v4 b: [UInt8]) -> Range {
        switch (b[0], b[1]) {
        case (127, _): return .loopback
        case (169, 254): return .linkLocal
        case (10, _), (0, _): return .privateOrReserved
        case (172, 16...31), (192, 168), (100, 64...127), (198, 18...19): return .privateOrReserved
        case (192, 0) where b[2] == 0 || b[2] == 2: return .privateOrReserved
        case (198, 51) where b[2] == 100, (203, 0) where b[2] == 113: return .privateOrReserved
        case (224...255, _): return .privateOrReserved
        default: return .global
        }
    }
}
