import Foundation
import Testing

@testable import GatehouseServer

/// Company domains without a store or a socket: which names count, the DNS wire format, and the re-check rule.
@Suite("Domain rules and the DNS wire format")
struct DomainRulesTests {
    @Test("a domain is lowercased and checked: two labels or more, no IP address, no local name")
    func normalization() {
        #expect(DomainRules.normalized(" Acme.COM. ") == "acme.com")
        #expect(DomainRules.normalized("mail.xn--bcher-kva.example") == "mail.xn--bcher-kva.example")
        for bad in [
            "", "com", "localhost", "printer.local", "a.localhost", "10.0.0.1", "acme..com", "-acme.com", "acme-.com",
            "ac_me.com", "acme.com/x", "bücher.de", String(repeating: "a", count: 64) + ".com",
            Array(repeating: "abcdefghi", count: 26).joined(separator: "."), "x.internal", "a.home.arpa",
        ] {
            #expect(DomainRules.normalized(bad) == nil, "\(bad) was accepted")
        }
        #expect(DomainRules.recordName("acme.com") == "_gatehouse-challenge.acme.com")
        #expect(DomainRules.recordValue("t0k") == "gatehouse-verification=t0k")
    }

    @Test("a query asks for one TXT record with recursion and an EDNS0 size")
    func query() throws {
        let bytes = try DNSMessage.query(id: 0xBEEF, name: "_g.acme.com")
        #expect(Array(bytes[0..<12]) == [0xBE, 0xEF, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1])
        let name: [UInt8] = [2] + Array("_g".utf8) + [4] + Array("acme".utf8) + [3] + Array("com".utf8) + [0]
        #expect(Array(bytes[12..<(12 + name.count)]) == name)
        #expect(Array(bytes[(12 + name.count)...]) == [0, 16, 0, 1, 0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 0])
        #expect(throws: DNSMessage.Failure.self) { try DNSMessage.query(id: 1, name: "a..b") }
        #expect(throws: DNSMessage.Failure.self) {
            try DNSMessage.query(id: 1, name: String(repeating: "a", count: 64) + ".com")
        }
    }

    /// An answer to `query(id:name:)`: the question, then `records` (each as its bytes after the owner name).
    static func answer(
        id: UInt16 = 7, flags: UInt16 = 0x8180, name: String = "_g.acme.com", records: [[UInt8]] = []
    ) throws -> [UInt8] {
        var bytes: [UInt8] = [UInt8(id >> 8), UInt8(id & 0xFF), UInt8(flags >> 8), UInt8(flags & 0xFF), 0, 1, 0]
        bytes += [UInt8(records.count), 0, 0, 0, 0]
        bytes += try DNSMessage.encode(name: name) + [0, 16, 0, 1]
        for record in records { bytes += record }
        return bytes
    }

    /// A TXT record owned by the question's name (a pointer to offset 12), holding `strings`.
    static func txt(_ strings: [String], owner: [UInt8] = [0xC0, 12], type: UInt8 = 16) -> [UInt8] {
        let data = strings.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }
        return owner + [0, type, 0, 1, 0, 0, 0, 60, UInt8(data.count >> 8), UInt8(data.count & 0xFF)] + data
    }

    @Test("answers: TXT records through compression pointers, joined strings, NXDOMAIN, a CNAME followed")
    func answers() throws {
        let two = try Self.answer(records: [Self.txt(["gatehouse-", "verification=x"]), Self.txt(["v=spf1 -all"])])
        #expect(
            try DNSMessage.answer(two, id: 7, name: "_G.Acme.com.")
                == .records(["gatehouse-verification=x", "v=spf1 -all"]))
        #expect(try DNSMessage.answer(try Self.answer(flags: 0x8183), id: 7, name: "_g.acme.com") == .nameNotFound)
        #expect(try DNSMessage.answer(try Self.answer(), id: 7, name: "_g.acme.com") == .records([]))
        // Another name's record is ignored; one a CNAME of the question leads to counts.
        let elsewhere = Self.txt(["other"], owner: try DNSMessage.encode(name: "x.example"))
        #expect(
            try DNSMessage.answer(try Self.answer(records: [elsewhere]), id: 7, name: "_g.acme.com") == .records([]))
        let target = try DNSMessage.encode(name: "t.example")
        let cname = [0xC0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, UInt8(target.count)] + target
        let aliased = try Self.answer(records: [cname, Self.txt(["via alias"], owner: target)])
        #expect(try DNSMessage.answer(aliased, id: 7, name: "_g.acme.com") == .records(["via alias"]))
    }

    @Test("answers not ours, failed, truncated or malformed are refused, and no bytes crash the decoder")
    func malformed() throws {
        let good = try Self.answer(records: [Self.txt(["v"])])
        #expect(throws: DNSMessage.Failure.notOurs) { try DNSMessage.answer(good, id: 8, name: "_g.acme.com") }
        #expect(throws: DNSMessage.Failure.notOurs) { try DNSMessage.answer(good, id: 7, name: "_h.acme.com") }
        #expect(throws: DNSMessage.Failure.notOurs) {
            try DNSMessage.answer(try Self.answer(flags: 0x0100), id: 7, name: "_g.acme.com")
        }
        #expect(throws: DNSMessage.Failure.serverFailure(rcode: 2)) {
            try DNSMessage.answer(try Self.answer(flags: 0x8182), id: 7, name: "_g.acme.com")
        }
        #expect(throws: DNSMessage.Failure.truncated) {
            try DNSMessage.answer(try Self.answer(flags: 0x8380), id: 7, name: "_g.acme.com")
        }
        // A pointer to itself, a pointer forward, a record longer than the message, a string past its record.
        for record: [UInt8] in [
            [0xC0, 30] + Array(Self.txt(["v"]).dropFirst(2)),
            [0xC0, 200] + Array(Self.txt(["v"]).dropFirst(2)),
            [0xC0, 12, 0, 16, 0, 1, 0, 0, 0, 60, 0, 9, 1, 65],
            [0xC0, 12, 0, 16, 0, 1, 0, 0, 0, 60, 0, 2, 9, 65],
            [0x80, 12],
        ] {
            #expect(throws: DNSMessage.Failure.self) {
                try DNSMessage.answer(try Self.answer(records: [record]), id: 7, name: "_g.acme.com")
            }
        }
        // Every prefix of a good answer, and random bytes after a good header, decode or fail: they never trap.
        for count in 0..<good.count {
            _ = try? DNSMessage.answer(Array(good[0..<count]), id: 7, name: "_g.acme.com")
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            var bytes = Array(good[0..<12])
            bytes += (0..<Int.random(in: 0...80, using: &generator)).map { _ in UInt8.random(in: 0...255) }
            _ = try? DNSMessage.answer(bytes, id: 7, name: "_g.acme.com")
        }
    }

    @Test("over TCP a query goes after its length in 2 bytes, and an answer is read once all its bytes have come")
    func tcpFraming() throws {
        let query = try DNSMessage.query(id: 0xBEEF, name: "_g.acme.com")
        let framed = DNSMessage.framed(query)
        #expect(framed.count == query.count + 2)
        #expect(Array(framed[0..<2]) == [0, UInt8(query.count)])
        #expect(Array(framed[2...]) == query)
        #expect(DNSMessage.framed([UInt8](repeating: 1, count: 300))[0..<2] == [1, 44])
        // Complete: the message alone, bytes after it ignored; a long one (as many TXT records make) too.
        let answer = try Self.answer(records: [Self.txt(["gatehouse-verification=x"])])
        #expect(DNSMessage.unframed(DNSMessage.framed(answer)) == answer)
        #expect(DNSMessage.unframed(DNSMessage.framed(answer) + [9, 9, 9]) == answer)
        #expect(DNSMessage.unframed([0, 0]) == [])
        let long = try Self.answer(records: (0..<40).map { _ in Self.txt([String(repeating: "s", count: 250)]) })
        #expect(long.count > DNSMessage.maxAnswerSize)
        let framedLong = DNSMessage.framed(long)
        #expect(DNSMessage.unframed(framedLong) == long)
        #expect(
            try DNSMessage.answer(try #require(DNSMessage.unframed(framedLong)), id: 7, name: "_g.acme.com")
                == .records(Array(repeating: String(repeating: "s", count: 250), count: 40)))
        // Cut short: nothing yet, half a length, or fewer bytes than the length says.
        for count in 0..<framedLong.count {
            #expect(DNSMessage.unframed(Array(framedLong[0..<count])) == nil)
        }
        #expect(DNSMessage.unframed([0xFF, 0xFF] + [UInt8](repeating: 0, count: 65_534)) == nil)
    }

    @Test("a re-check: confirmed, failed, lost on the third failure in a row, and no answer counts for nothing")
    func recheck() {
        let now = Date(timeIntervalSince1970: 1_000_000)
        let value = "gatehouse-verification=t"
        #expect(
            DomainRules.recheck(.records(["x", value]), expected: value, failures: 2, now: now)
                == .confirmed(next: now.addingTimeInterval(24 * 3600)))
        #expect(
            DomainRules.recheck(.records(["gatehouse-verification=other"]), expected: value, failures: 0, now: now)
                == .failed(failures: 1, next: now.addingTimeInterval(3600)))
        #expect(
            DomainRules.recheck(.nameNotFound, expected: value, failures: 1, now: now)
                == .failed(failures: 2, next: now.addingTimeInterval(3600)))
        #expect(DomainRules.recheck(.records([]), expected: value, failures: 2, now: now) == .lost(failures: 3))
        #expect(
            DomainRules.recheck(nil, expected: value, failures: 2, now: now)
                == .unanswered(next: now.addingTimeInterval(15 * 60)))
    }

    @Test("--dns-resolver takes an address and an optional port; the default is resolv.conf's first nameserver")
    func resolverAddress() throws {
        #expect(DNSResolver.address("127.0.0.1:5353")?.port == 5353)
        #expect(DNSResolver.address("10.0.0.2")?.port == 53)
        #expect(DNSResolver.address("[::1]:53")?.port == 53)
        #expect(DNSResolver.address("::1")?.port == 53)
        for bad in ["dns.example:53", "127.0.0.1:0", "127.0.0.1:x", "[::1", ""] {
            #expect(DNSResolver.address(bad) == nil, "\(bad) was accepted")
        }
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let path = folder.path + "/resolv.conf"
        try "# comment\nsearch example\nnameserver fe80::1%eth0\nnameserver 192.0.2.53\nnameserver 192.0.2.54\n"
            .write(toFile: path, atomically: true, encoding: .utf8)
        #expect(DNSResolver.system(resolvConf: path).ipAddress == "192.0.2.53")
        #expect(DNSResolver.system(resolvConf: folder.path + "/none").ipAddress == "127.0.0.1")
    }
}
