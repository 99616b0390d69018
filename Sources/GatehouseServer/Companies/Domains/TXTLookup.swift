import Foundation
import NIOCore
import NIOPosix

/// Looks up a name's TXT records; the resolver `--dns-resolver` names, or a test's own.
protocol TXTLookup: Sendable {
    /// The records at `name`; throws `TXTLookupFailure` when no usable answer came.
    func txt(_ name: String) async throws -> DNSMessage.Answer
}

/// Why a lookup gave no answer: the resolver did not answer in time, or answered with a failure.
struct TXTLookupFailure: Error, Sendable, CustomStringConvertible {
    let reason: String
    var description: String { reason }
}

/// A stub resolver: one query to one recursive resolver, an answer with our random id from its address within
/// `timeout`, else a failure. The query goes over UDP; when the answer is truncated (TC: a name with many TXT records,
/// SPF and several vendors' verification strings, may not fit), the same question goes again over TCP to the same
/// resolver within the same `timeout` (RFC 7766), and a TCP answer that does not come is a failure like any other.
struct DNSResolver: TXTLookup {
    let server: SocketAddress
    var timeout: Duration = .seconds(3)

    /// The resolver at `hostPort` (`HOST:PORT`, `[IPv6]:PORT`, or an address alone for port 53); nil when it is none.
    static func address(_ hostPort: String) -> SocketAddress? {
        var host = hostPort
        var port = 53
        if hostPort.hasPrefix("[") {
            guard let close = hostPort.firstIndex(of: "]") else { return nil }
            host = String(hostPort[hostPort.index(after: hostPort.startIndex)..<close])
            let rest = hostPort[hostPort.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":"), let number = Int(rest.dropFirst()) else { return nil }
                port = number
            }
        } else if hostPort.filter({ $0 == ":" }).count == 1, let colon = hostPort.firstIndex(of: ":") {
            host = String(hostPort[..<colon])
            guard let number = Int(hostPort[hostPort.index(after: colon)...]) else { return nil }
            port = number
        }
        guard (1...65535).contains(port) else { return nil }
        return try? SocketAddress(ipAddress: host, port: port)
    }

    /// The system's resolver: the first `nameserver` in `resolvConf` (`/etc/resolv.conf`), else 127.0.0.1:53.
    static func system(resolvConf: String = "/etc/resolv.conf") -> SocketAddress {
        let text = (try? String(contentsOfFile: resolvConf, encoding: .utf8)) ?? ""
        for line in text.split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 2, fields[0] == "nameserver" else { continue }
            // A scoped IPv6 address (fe80::1%eth0) cannot be reached without its scope; the next line may serve.
            if !fields[1].contains("%"), let address = try? SocketAddress(ipAddress: String(fields[1]), port: 53) {
                return address
            }
        }
        return try! SocketAddress(ipAddress: "127.0.0.1", port: 53)
    }

    func txt(_ name: String) async throws -> DNSMessage.Answer {
        let id = UInt16.random(in: 0...UInt16.max)
        let query: [UInt8]
        do {
            query = try DNSMessage.query(id: id, name: name)
        } catch {
            throw TXTLookupFailure(reason: error.description)
        }
        let timeout = self.timeout
        return try await withThrowingTaskGroup(of: DNSMessage.Answer.self) { group in
            group.addTask {
                if let answer = try await overUDP(query, id: id, name: name) { return answer }
                return try await overTCP(query, id: id, name: name)
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw TXTLookupFailure(reason: "the resolver at \(server) did not answer within \(timeout)")
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    /// Sends `query` and reads datagrams until one from the resolver answers it; others are ignored. Nil when the
    /// answer was truncated.
    private func overUDP(_ query: [UInt8], id: UInt16, name: String) async throws -> DNSMessage.Answer? {
        let bindHost = server.protocol == .inet6 ? "::" : "0.0.0.0"
        let channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: bindHost, port: 0) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<AddressedEnvelope<ByteBuffer>, AddressedEnvelope<ByteBuffer>>(
                        wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            try await outbound.write(AddressedEnvelope(remoteAddress: server, data: ByteBuffer(bytes: query)))
            for try await envelope in inbound {
                guard envelope.remoteAddress == server, envelope.data.readableBytes <= DNSMessage.maxAnswerSize
                else { continue }
                do throws(DNSMessage.Failure) {
                    return try DNSMessage.answer(Array(envelope.data.readableBytesView), id: id, name: name)
                } catch .notOurs {
                    continue
                } catch .truncated {
                    return nil
                } catch {
                    throw TXTLookupFailure(reason: error.description)
                }
            }
            throw TXTLookupFailure(reason: "the resolver's socket closed")
        }
    }

    /// Sends `query` over a TCP connection to the resolver, framed, and reads its framed answer: at most 2 + 65535
    /// bytes, as the length in front says. Not connecting, a reset, a close before the whole answer, or an answer to
    /// another id is a failure.
    private func overTCP(_ query: [UInt8], id: UInt16, name: String) async throws -> DNSMessage.Answer {
        do {
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(TimeAmount(timeout))
                .connect(to: server) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
            return try await channel.executeThenClose { inbound, outbound in
                try await outbound.write(ByteBuffer(bytes: DNSMessage.framed(query)))
                var received: [UInt8] = []
                for try await chunk in inbound {
                    received += chunk.readableBytesView
                    guard let message = DNSMessage.unframed(received) else { continue }
                    do throws(DNSMessage.Failure) {
                        return try DNSMessage.answer(message, id: id, name: name)
                    } catch {
                        throw TXTLookupFailure(reason: "over TCP: \(error.description)")
                    }
                }
                throw TXTLookupFailure(reason: "the resolver closed the TCP connection before the whole answer came")
            }
        } catch let failure as TXTLookupFailure {
            throw failure
        } catch {
            throw TXTLookupFailure(reason: "the resolver at \(server) failed over TCP: \(error)")
        }
    }
}
