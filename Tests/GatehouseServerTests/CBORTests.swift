import Testing

@testable import GatehouseServer

/// The strict CBOR decoder passkeys use: RFC 8949 Appendix A's examples in the subset WebAuthn needs, and each
/// refusal with its own error.
@Suite("CBOR decoding")
struct CBORTests {
    @Test(
        "RFC 8949 Appendix A: integers",
        arguments: [
            ("00", CBOR.unsigned(0)), ("01", .unsigned(1)), ("0a", .unsigned(10)), ("17", .unsigned(23)),
            ("1818", .unsigned(24)), ("1819", .unsigned(25)), ("1864", .unsigned(100)), ("1903e8", .unsigned(1000)),
            ("1a000f4240", .unsigned(1_000_000)), ("1b000000e8d4a51000", .unsigned(1_000_000_000_000)),
            ("1bffffffffffffffff", .unsigned(.max)), ("20", .negative(0)), ("29", .negative(9)),
            ("3863", .negative(99)), ("3903e7", .negative(999)), ("3bffffffffffffffff", .negative(.max)),
        ])
    func integers(hex: String, expected: CBOR) throws {
        #expect(try CBOR.decode(bytes(hex)) == expected)
        #expect(expected.encoded == bytes(hex))
    }

    @Test("Integers read back as Int, and those out of its range do not")
    func intValues() throws {
        #expect(try CBOR.decode(bytes("3903e7")).intValue == -1000)
        #expect(try CBOR.decode(bytes("20")).intValue == -1)
        #expect(try CBOR.decode(bytes("1a000f4240")).intValue == 1_000_000)
        #expect(try CBOR.decode(bytes("1bffffffffffffffff")).intValue == nil)
        #expect(try CBOR.decode(bytes("3bffffffffffffffff")).intValue == nil)
        #expect(try CBOR.decode(bytes("3b7fffffffffffffff")).intValue == .min)
    }

    @Test(
        "RFC 8949 Appendix A: strings, simple values, arrays and maps",
        arguments: [
            ("f4", CBOR.bool(false)), ("f5", .bool(true)), ("f6", .null),
            ("40", .bytes([])), ("4401020304", .bytes([1, 2, 3, 4])),
            ("60", .text("")), ("6161", .text("a")), ("6449455446", .text("IETF")), ("62225c", .text("\"\\")),
            ("62c3bc", .text("\u{00fc}")), ("63e6b0b4", .text("\u{6c34}")), ("64f0908591", .text("\u{10151}")),
            ("80", .array([])), ("83010203", .array([.unsigned(1), .unsigned(2), .unsigned(3)])),
            (
                "8301820203820405",
                .array([
                    .unsigned(1), .array([.unsigned(2), .unsigned(3)]), .array([.unsigned(4), .unsigned(5)]),
                ])
            ),
            (
                "98190102030405060708090a0b0c0d0e0f101112131415161718181819",
                .array((1...25).map { .unsigned($0) })
            ),
            ("a0", .map([])),
            (
                "a201020304",
                .map([.init(key: .unsigned(1), value: .unsigned(2)), .init(key: .unsigned(3), value: .unsigned(4))])
            ),
            (
                "a26161016162820203",
                .map([
                    .init(key: .text("a"), value: .unsigned(1)),
                    .init(key: .text("b"), value: .array([.unsigned(2), .unsigned(3)])),
                ])
            ),
            ("826161a161626163", .array([.text("a"), .map([.init(key: .text("b"), value: .text("c"))])])),
            (
                "a56161614161626142616361436164614461656145",
                .map(
                    zip(["a", "b", "c", "d", "e"], ["A", "B", "C", "D", "E"]).map {
                        CBOR.Pair(key: .text($0), value: .text($1))
                    })
            ),
        ])
    func structures(hex: String, expected: CBOR) throws {
        #expect(try CBOR.decode(bytes(hex)) == expected)
        #expect(expected.encoded == bytes(hex))
    }

    @Test("A map keeps its pairs in the order sent, and is read by text and integer keys")
    func mapLookups() throws {
        // {"b": 1, "a": 2, 3: -7, -1: h'00', -2: "x"}: a COSE key's kind of labels.
        let map = try CBOR.decode(bytes("a56162016161020326204100216178"))
        #expect(map.mapPairs?.map(\.key) == [.text("b"), .text("a"), .unsigned(3), .negative(0), .negative(1)])
        #expect(map[text: "a"] == .unsigned(2))
        #expect(map[text: "c"] == nil)
        #expect(map[int: 3]?.intValue == -7)
        #expect(map[int: -1] == .bytes([0]))
        #expect(map[int: -2]?.textValue == "x")
        #expect(map[int: 1] == nil)
        #expect(CBOR.unsigned(1)[text: "a"] == nil)
    }

    @Test(
        "Indefinite lengths are refused",
        arguments: [
            "5f42010243030405ff", "7f657374726561646d696e67ff", "9fff", "9f018202039f0405ffff",
            "bf61610161629f0203ffff", "826161bf61626163ff",
        ])
    func indefiniteLengths(hex: String) {
        #expect(throws: CBOR.Error.indefiniteLength) { try CBOR.decode(bytes(hex)) }
    }

    @Test(
        "Arguments longer than they need be are refused",
        arguments: [
            "1800", "1817", "190017", "1900ff", "1a0000ffff", "1b00000000ffffffff", "3817", "5800", "5900ff",
            "7800", "9800", "b800", "8218170a",
        ])
    func nonMinimal(hex: String) {
        #expect(throws: CBOR.Error.nonMinimal) { try CBOR.decode(bytes(hex)) }
    }

    @Test(
        "Floats, tags, undefined, simple values, reserved heads and non-scalar map keys are refused",
        arguments: [
            // Floats: 0.0 (half), 100000.0 (single), 1.1 (double), NaN.
            "f90000", "fa47c35000", "fb3ff199999999999a", "f97e00",
            // undefined, simple(16), simple(255), a lone break.
            "f7", "f0", "f8ff", "ff",
            // Tags: an epoch date, an embedded byte string, a bignum, a self-described CBOR.
            "c11a514b67b0", "d74401020304", "c249010000000000000000", "d9d9f700",
            // Reserved additional information, and 31 on an integer.
            "1c", "1d", "1e", "1f", "3f",
            // Map keys that are byte strings, arrays, maps, booleans or null.
            "a14001", "a18001", "a1a00001", "a1f501", "a1f601",
        ])
    func unsupportedTypes(hex: String) {
        #expect(throws: CBOR.Error.unsupportedType) { try CBOR.decode(bytes(hex)) }
    }

    @Test(
        "Every proper prefix of an item is truncated",
        arguments: [
            "a26161016162820203", "1bffffffffffffffff", "4401020304", "64f0908591", "8301820203820405",
            // An attestation object's shape: {"fmt": "none", "attStmt": {}, "authData": h'0102'}.
            "a363666d74646e6f6e656761747453746d74a06861757468446174614201 02",
        ])
    func truncated(hex: String) throws {
        let item = bytes(hex)
        _ = try CBOR.decode(item)
        for length in 0..<item.count {
            #expect(throws: CBOR.Error.truncated) { try CBOR.decode(Array(item.prefix(length))) }
        }
    }

    @Test(
        "A declared length or count beyond the input is refused before anything is allocated",
        arguments: [
            "5bffffffffffffffff00", "7bffffffffffffffff", "9bffffffffffffffff", "bbffffffffffffffff",
            "5a7fffffff01", "9a0001000000", "b9800000",
            // A map of 3 pairs needs 6 bytes at least: 5 remain.
            "a30102030405",
        ])
    func hostileLengths(hex: String) {
        #expect(throws: CBOR.Error.truncated) { try CBOR.decode(bytes(hex)) }
    }

    @Test("Duplicate map keys are refused, at any depth")
    func duplicateKeys() {
        #expect(throws: CBOR.Error.duplicateKey) { try CBOR.decode(bytes("a2616101616102")) }
        #expect(throws: CBOR.Error.duplicateKey) { try CBOR.decode(bytes("a201020103")) }
        #expect(throws: CBOR.Error.duplicateKey) { try CBOR.decode(bytes("a220012002")) }
        #expect(throws: CBOR.Error.duplicateKey) { try CBOR.decode(bytes("81a2616101616102")) }
    }

    @Test("Nesting deeper than the limit is refused; the limit is configurable")
    func depth() throws {
        let eight = bytes(String(repeating: "81", count: 7) + "80")
        let nine = bytes(String(repeating: "81", count: 8) + "80")
        _ = try CBOR.decode(eight)
        #expect(throws: CBOR.Error.tooDeep) { try CBOR.decode(nine) }
        #expect(try CBOR.decode(bytes("a1616181a0"), maxDepth: 3) == CBOR.decode(bytes("a1616181a0")))
        #expect(throws: CBOR.Error.tooDeep) { try CBOR.decode(bytes("a1616181a0"), maxDepth: 2) }
        #expect(throws: CBOR.Error.tooDeep) { try CBOR.decode(bytes("80"), maxDepth: 0) }
        // Sixty thousand nested arrays stop at the ninth, without a deep stack.
        #expect(throws: CBOR.Error.tooDeep) { try CBOR.decode([UInt8](repeating: 0x81, count: 60000)) }
    }

    @Test("Input longer than 64 KiB is refused; 64 KiB is not")
    func tooLarge() throws {
        let limit = bytes("59fffd") + [UInt8](repeating: 7, count: 65533)
        #expect(limit.count == 64 * 1024)
        #expect(try CBOR.decode(limit).bytesValue?.count == 65533)
        let over = bytes("59fffe") + [UInt8](repeating: 7, count: 65534)
        #expect(throws: CBOR.Error.tooLarge) { try CBOR.decode(over) }
        #expect(throws: CBOR.Error.tooLarge) { try CBOR.decodePrefix(over[...]) }
    }

    @Test(
        "Text that is not UTF-8 is refused",
        arguments: [
            "61ff", "6180", "62c328", "62c0af", "63eda080", "62e282", "64f4908080", "64f8888080", "6261ff",
        ])
    func invalidUTF8(hex: String) {
        #expect(throws: CBOR.Error.invalidUTF8) { try CBOR.decode(bytes(hex)) }
    }

    @Test("Bytes after the item are refused by decode, and counted by decodePrefix")
    func trailingBytes() throws {
        #expect(throws: CBOR.Error.trailingBytes) { try CBOR.decode(bytes("0000")) }
        #expect(throws: CBOR.Error.trailingBytes) { try CBOR.decode(bytes("a0ff")) }
        let item = bytes("a26161016162820203")
        let (value, length) = try CBOR.decodePrefix((item + [0xff, 0x00])[...])
        #expect(length == item.count)
        #expect(value[text: "a"] == .unsigned(1))
        // A slice that does not start at zero, as authenticator data hands over its key and extensions.
        let input = [0xee, 0xee, 0xee] + item + [0xa0]
        let (_, used) = try CBOR.decodePrefix(input[3...])
        #expect(used == item.count)
        #expect(try CBOR.decode(input[(3 + used)...]) == .map([]))
    }

    /// `hex` as bytes; spaces are ignored.
    private func bytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.replacingOccurrences(of: " ", with: "").utf8)
        return stride(from: 0, to: digits.count, by: 2).map {
            UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)!
        }
    }
}

extension CBOR {
    /// The item in shortest form, pairs in their order: test input built from decoded or hand-written items.
    var encoded: [UInt8] {
        switch self {
        case .unsigned(let value): Self.head(0, value)
        case .negative(let value): Self.head(1, value)
        case .bytes(let bytes): Self.head(2, UInt64(bytes.count)) + bytes
        case .text(let text): Self.head(3, UInt64(text.utf8.count)) + text.utf8
        case .array(let items): Self.head(4, UInt64(items.count)) + items.flatMap(\.encoded)
        case .map(let pairs): Self.head(5, UInt64(pairs.count)) + pairs.flatMap { $0.key.encoded + $0.value.encoded }
        case .bool(let value): [value ? 0xf5 : 0xf4]
        case .null: [0xf6]
        }
    }

    /// An integer item.
    static func int(_ value: Int) -> CBOR {
        value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-1 - value))
    }

    /// A map from pairs written as a literal.
    static func mapOf(_ pairs: KeyValuePairs<CBOR, CBOR>) -> CBOR {
        .map(pairs.map { Pair(key: $0.key, value: $0.value) })
    }

    /// This map with `key`'s value replaced, or the pair added at the end.
    func setting(_ key: CBOR, to value: CBOR) -> CBOR {
        var pairs = mapPairs ?? []
        if let index = pairs.firstIndex(where: { $0.key == key }) {
            pairs[index].value = value
        } else {
            pairs.append(Pair(key: key, value: value))
        }
        return .map(pairs)
    }

    private static func head(_ major: UInt8, _ argument: UInt64) -> [UInt8] {
        let width: Int
        switch argument {
        case 0..<24: return [major << 5 | UInt8(argument)]
        case ...0xff: width = 1
        case ...0xffff: width = 2
        case ...0xffff_ffff: width = 4
        default: width = 8
        }
        let info: UInt8 = [1: 24, 2: 25, 4: 26, 8: 27][width]!
        return [major << 5 | info] + (0..<width).reversed().map { UInt8(truncatingIfNeeded: argument >> ($0 * 8)) }
    }
}
