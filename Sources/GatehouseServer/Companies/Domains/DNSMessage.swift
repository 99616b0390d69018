/// The DNS wire format for one question, a TXT record of one name, and its answer (RFC 1035, 4.1; EDNS0 in RFC 6891),
/// and their framing over TCP (RFC 1035, 4.2.2): pure functions, tested without a socket. Decoding never traps on what a server or an attacker sends: every read is
/// bounded, a name's compression pointers may only point backwards, and a malformed answer is a `Failure`.
enum DNSMessage {
    static let typeTXT: UInt16 = 16
    static let typeCNAME: UInt16 = 5
    static let typeOPT: UInt16 = 41
    static let classIN: UInt16 = 1
    /// The UDP payload size this client announces (EDNS0) and the largest answer it reads over UDP.
    static let maxAnswerSize = 1232
    /// The largest message over TCP, where a 2-byte length precedes it.
    static let maxTCPMessageSize = 65_535

    /// What a name server said about the name.
    enum Answer: Sendable, Equatable {
        /// The TXT records at the name (each one's strings joined, as SPF and DKIM read them); empty when the name
        /// exists without one.
        case records([String])
        /// NXDOMAIN: the name does not exist.
        case nameNotFound
    }

    /// Why an answer could not be used.
    enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// Not an answer to our question (another id, not a response, another question).
        case notOurs
        /// The server failed (SERVFAIL, REFUSED, …), with its response code.
        case serverFailure(rcode: UInt8)
        /// The answer did not fit (TC): the resolver asks the question again over TCP.
        case truncated
        case malformed(String)

        var description: String {
            switch self {
            case .notOurs: "not an answer to this question"
            case .serverFailure(let rcode): "the name server failed (rcode \(rcode))"
            case .truncated: "the answer was truncated"
            case .malformed(let reason): "malformed answer: \(reason)"
            }
        }
    }

    /// A query for the TXT records of `name` (a normalized domain name: ASCII labels of 1 to 63 bytes), with
    /// recursion desired and an EDNS0 record announcing `maxAnswerSize`.
    static func query(id: UInt16, name: String) throws(Failure) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(12 + name.utf8.count + 2 + 4 + 11)
        append(id, to: &bytes)
        append(0x0100, to: &bytes)  // RD
        append(1, to: &bytes)  // QDCOUNT
        append(0, to: &bytes)  // ANCOUNT
        append(0, to: &bytes)  // NSCOUNT
        append(1, to: &bytes)  // ARCOUNT: the OPT record
        bytes += try encode(name: name)
        append(typeTXT, to: &bytes)
        append(classIN, to: &bytes)
        // OPT: root name, type 41, class = UDP payload size, TTL 0 (extended rcode, version, flags), no data.
        bytes.append(0)
        append(typeOPT, to: &bytes)
        append(UInt16(maxAnswerSize), to: &bytes)
        bytes += [0, 0, 0, 0, 0, 0]
        return bytes
    }

    /// `message` as it goes over TCP: after its length in 2 bytes, network order (RFC 1035, 4.2.2). A message is
    /// at most `maxTCPMessageSize` bytes (a query is at most a few hundred).
    static func framed(_ message: [UInt8]) -> [UInt8] {
        precondition(message.count <= maxTCPMessageSize, "a DNS message is at most 65535 bytes")
        var bytes: [UInt8] = []
        bytes.reserveCapacity(2 + message.count)
        append(UInt16(message.count), to: &bytes)
        return bytes + message
    }

    /// The first message in `received`, the bytes read so far from a TCP stream of framed messages; nil until all
    /// the bytes its length announces have come. Bytes after it are ignored: a stub asks one question.
    static func unframed(_ received: [UInt8]) -> [UInt8]? {
        guard received.count >= 2 else { return nil }
        let length = Int(received[0]) << 8 | Int(received[1])
        guard received.count >= 2 + length else { return nil }
        return Array(received[2..<(2 + length)])
    }

    /// `name` as length-prefixed labels ending in the root.
    static func encode(name: String) throws(Failure) -> [UInt8] {
        var bytes: [UInt8] = []
        let trimmed = name.hasSuffix(".") ? String(name.dropLast()) : name
        for label in trimmed.split(separator: ".", omittingEmptySubsequences: false) {
            let utf8 = Array(label.utf8)
            guard (1...63).contains(utf8.count) else { throw .malformed("a label of the name is empty or too long") }
            bytes.append(UInt8(utf8.count))
            bytes += utf8
        }
        bytes.append(0)
        guard bytes.count <= 255 else { throw .malformed("the name is longer than 255 bytes") }
        return bytes
    }

    /// The answer to the query `id` for `name`'s TXT records. Records of other names are ignored, but for those a
    /// CNAME in the same answer leads to from `name`.
    static func answer(_ bytes: [UInt8], id: UInt16, name: String) throws(Failure) -> Answer {
        guard bytes.count <= 65_535 else { throw .malformed("longer than a DNS message") }
        var reader = Reader(bytes: bytes)
        guard try reader.uint16() == id else { throw .notOurs }
        let flags = try reader.uint16()
        guard flags & 0x8000 != 0, (flags >> 11) & 0xF == 0 else { throw .notOurs }
        // Before the question: a truncated answer may leave it out; the question asked again over TCP is checked there.
        guard flags & 0x0200 == 0 else { throw .truncated }
        let questions = try reader.uint16()
        let answers = try reader.uint16()
        _ = try reader.uint16()  // NSCOUNT
        _ = try reader.uint16()  // ARCOUNT
        let wanted = canonical(name)
        guard questions == 1 else { throw .notOurs }
        guard canonical(try reader.name()) == wanted, try reader.uint16() == typeTXT, try reader.uint16() == classIN
        else { throw .notOurs }
        switch UInt8(flags & 0xF) {
        case 0: break
        case 3: return .nameNotFound
        case let rcode: throw .serverFailure(rcode: rcode)
        }
        var owners: Set<String> = [wanted]
        var records: [String] = []
        for _ in 0..<answers {
            let owner = canonical(try reader.name())
            let type = try reader.uint16()
            let recordClass = try reader.uint16()
            _ = try reader.uint32()  // TTL
            let length = Int(try reader.uint16())
            let end = reader.offset + length
            guard end <= bytes.count else { throw .malformed("a record runs past the end") }
            if owners.contains(owner), recordClass == classIN {
                if type == typeCNAME {
                    owners.insert(canonical(try reader.name()))
                } else if type == typeTXT {
                    records.append(try reader.characterStrings(until: end))
                }
            }
            reader.offset = end
        }
        return .records(records)
    }

    /// Lowercased, without a trailing dot: DNS names compare without case.
    static func canonical(_ name: String) -> String {
        (name.hasSuffix(".") ? String(name.dropLast()) : name).lowercased()
    }

    private static func append(_ value: UInt16, to bytes: inout [UInt8]) {
        bytes.append(UInt8(value >> 8))
        bytes.append(UInt8(value & 0xFF))
    }

    /// Bounded reads from a message.
    struct Reader {
        let bytes: [UInt8]
        var offset = 0

        mutating func uint8() throws(Failure) -> UInt8 {
            guard offset < bytes.count else { throw .malformed("ends early") }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func uint16() throws(Failure) -> UInt16 {
            UInt16(try uint8()) << 8 | UInt16(try uint8())
        }

        mutating func uint32() throws(Failure) -> UInt32 {
            UInt32(try uint16()) << 16 | UInt32(try uint16())
        }

        /// A name at the current offset, following compression pointers (each to an offset before where the labels
        /// it continues began, so a loop cannot form), leaving the offset after the name as it is written here.
        mutating func name() throws(Failure) -> String {
            var labels: [String] = []
            var position = offset
            var runStart = offset
            var resumeAt: Int?
            var length = 0
            while true {
                guard position < bytes.count else { throw .malformed("a name runs past the end") }
                let byte = bytes[position]
                if byte == 0 {
                    position += 1
                    break
                }
                switch byte & 0xC0 {
                case 0xC0:
                    guard position + 1 < bytes.count else { throw .malformed("a pointer runs past the end") }
                    let target = Int(byte & 0x3F) << 8 | Int(bytes[position + 1])
                    guard target < runStart else { throw .malformed("a name pointer does not point back") }
                    if resumeAt == nil { resumeAt = position + 2 }
                    position = target
                    runStart = target
                case 0x00:
                    let count = Int(byte)
                    guard position + 1 + count <= bytes.count else { throw .malformed("a label runs past the end") }
                    length += count + 1
                    guard length <= 255 else { throw .malformed("a name is longer than 255 bytes") }
                    labels.append(String(decoding: bytes[(position + 1)..<(position + 1 + count)], as: UTF8.self))
                    position += 1 + count
                default:
                    throw .malformed("a label of an unknown kind")
                }
            }
            offset = resumeAt ?? position
            return labels.joined(separator: ".")
        }

        /// A TXT record's data: one or more length-prefixed strings, joined.
        mutating func characterStrings(until end: Int) throws(Failure) -> String {
            var value: [UInt8] = []
            while offset < end {
                let count = Int(try uint8())
                guard offset + count <= end else { throw .malformed("a TXT string runs past its record") }
                value += bytes[offset..<(offset + count)]
                offset += count
            }
            return String(decoding: value, as: UTF8.self)
        }
    }
}
