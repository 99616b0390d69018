import Foundation

/// An IPv4 or IPv6 network such as `10.0.0.0/8` or `::1/128`; a bare address is a network of one.
public struct IPNetwork: Sendable, Equatable, CustomStringConvertible {
    let bytes: [UInt8]
    let prefixLength: Int

    /// Parses `a.b.c.d/n`, `x::y/n` or a bare address; nil when it is neither.
    public init?(_ text: String) {
        let parts = text.trimmingHTTPWhitespace.split(separator: "/", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let bytes = Self.parseAddress(String(parts[0])) else { return nil }
        let maximum = bytes.count * 8
        var length = maximum
        if parts.count == 2 {
            guard let given = Int(parts[1]), (0...maximum).contains(given) else { return nil }
            length = given
        }
        self.bytes = bytes
        self.prefixLength = length
    }

    /// Whether `address` (already parsed) lies inside this network.
    func contains(_ address: [UInt8]) -> Bool {
        guard address.count == bytes.count else { return false }
        var remaining = prefixLength
        for index in bytes.indices where remaining > 0 {
            let bits = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
            if address[index] & mask != bytes[index] & mask { return false }
            remaining -= bits
        }
        return true
    }

    public var description: String {
        (bytes.count == 4 ? bytes.map(String.init).joined(separator: ".") : "ipv6") + "/\(prefixLength)"
    }

    /// The 4 or 16 bytes of an address; IPv4-mapped IPv6 (`::ffff:a.b.c.d`) becomes IPv4. Brackets and an
    /// IPv6 zone are ignored.
    static func parseAddress(_ raw: String) -> [UInt8]? {
        var text = String(raw.trimmingHTTPWhitespace)
        if text.hasPrefix("["), let end = text.firstIndex(of: "]") {
            text = String(text[text.index(after: text.startIndex)..<end])
        }
        if let zone = text.firstIndex(of: "%") { text = String(text[..<zone]) }
        if !text.contains(":") {
            var address = in_addr()
            guard inet_pton(AF_INET, text, &address) == 1 else { return nil }
            return withUnsafeBytes(of: &address) { Array($0) }
        }
        var address = in6_addr()
        guard inet_pton(AF_INET6, text, &address) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: &address) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF { return Array(bytes[12...]) }
        return bytes
    }
}

/// Where a request really came from, behind zero or more trusted proxies (docs/security.md): the rightmost
/// `X-Forwarded-For` entry that is not a trusted proxy. The header is read only when the socket's peer is itself a
/// trusted proxy, so a client that talks to the server directly cannot name any address it likes.
enum ClientAddress {
    static func resolve(peer: String?, forwardedFor: [String], trustedProxies: [IPNetwork]) -> String? {
        guard !trustedProxies.isEmpty, let peer, isTrusted(peer, trustedProxies) else { return peer }
        let hops = forwardedFor.flatMap { $0.split(separator: ",") }.map { String($0.trimmingHTTPWhitespace) }
        var client = peer
        for hop in hops.reversed() {
            // A malformed entry was written by someone we cannot trust: stop at the last address we could.
            guard IPNetwork.parseAddress(hop) != nil else { return client }
            client = hop
            if !isTrusted(hop, trustedProxies) { return hop }
        }
        return client
    }

    static func isTrusted(_ address: String, _ networks: [IPNetwork]) -> Bool {
        guard let bytes = IPNetwork.parseAddress(address) else { return false }
        return networks.contains { $0.contains(bytes) }
    }
}

extension ClientAddress {
    /// The key every per-address limit counts a client under (issue 35, finding 6): an IPv4 address as dotted
    /// decimal, IPv4-mapped IPv6 as its IPv4 address, and IPv6 as its /64 written as RFC 5952 does
    /// (`2001:db8:1:2::/64`). One subscriber is usually handed a whole /64, so keyed by the address text, each of its
    /// 2⁶⁴ addresses (and each spelling of one) would have had limits of its own. Text that is no address (a peer
    /// that is not an IP socket) is its own key; no address at all is `unknown`. The audit trail keeps the full
    /// address (`ClientInfo.ip`).
    static func limitKey(_ address: String?) -> String {
        guard let address else { return "unknown" }
        guard let bytes = IPNetwork.parseAddress(address) else { return "unparsed:" + address.prefix(64) }
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        // The four groups of the prefix; the four after them are zero, and that run is the longest, so it is the one
        // RFC 5952 writes as `::`, together with any zero groups that end the prefix.
        var groups = (0..<4).map { UInt16(bytes[2 * $0]) << 8 | UInt16(bytes[2 * $0 + 1]) }
        while groups.last == 0 { groups.removeLast() }
        return groups.map { String($0, radix: 16) }.joined(separator: ":") + "::/64"
    }
}
