/// The little CBOR (RFC 8949) the software authenticator writes: integers, byte and text strings, arrays and maps,
/// definite lengths, shortest-form heads. Map pairs are written in the order given; CTAP2's canonical order is
/// the caller's.
enum CBOREncoder {
    /// An item to encode.
    indirect enum Item {
        case int(Int)
        case bytes([UInt8])
        case text(String)
        case array([Item])
        case map([(Item, Item)])
    }

    static func encode(_ item: Item) -> [UInt8] {
        var output: [UInt8] = []
        append(item, to: &output)
        return output
    }

    private static func append(_ item: Item, to output: inout [UInt8]) {
        switch item {
        case .int(let value) where value >= 0:
            head(major: 0, UInt64(value), to: &output)
        case .int(let value):
            head(major: 1, UInt64(-1 - value), to: &output)
        case .bytes(let bytes):
            head(major: 2, UInt64(bytes.count), to: &output)
            output += bytes
        case .text(let text):
            head(major: 3, UInt64(text.utf8.count), to: &output)
            output += text.utf8
        case .array(let items):
            head(major: 4, UInt64(items.count), to: &output)
            for item in items { append(item, to: &output) }
        case .map(let pairs):
            head(major: 5, UInt64(pairs.count), to: &output)
            for (key, value) in pairs {
                append(key, to: &output)
                append(value, to: &output)
            }
        }
    }

    /// A head in its shortest form: the argument in the initial byte below 24, else in 1, 2, 4 or 8 bytes.
    private static func head(major: UInt8, _ argument: UInt64, to output: inout [UInt8]) {
        let (info, width): (UInt8, Int)
        switch argument {
        case 0..<24:
            output.append(major << 5 | UInt8(argument))
            return
        case ...0xff: (info, width) = (24, 1)
        case ...0xffff: (info, width) = (25, 2)
        case ...0xffff_ffff: (info, width) = (26, 4)
        default: (info, width) = (27, 8)
        }
        output.append(major << 5 | info)
        for shift in stride(from: (width - 1) * 8, through: 0, by: -8) {
            output.append(UInt8(truncatingIfNeeded: argument >> UInt64(shift)))
        }
    }
}
