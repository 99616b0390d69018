/// A CBOR data item (RFC 8949), limited to what WebAuthn sends: attestation objects, COSE keys and authenticator
/// extensions. The decoder is strict, for input that an attacker wrote: definite lengths, shortest-form heads,
/// valid UTF-8, unique integer or text map keys, no tags, floats or simple values other than false, true and null.
///
/// This file depends on nothing but the standard library, so the fuzzer (`scripts/fuzz-cbor.sh`) compiles it alone.
enum CBOR: Hashable, Sendable {
    case unsigned(UInt64)
    /// The integer `-1 - n` (major type 1), so the whole range down to -2^64 fits.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBOR])
    /// A map's pairs in the order they were sent.
    case map([Pair])
    case bool(Bool)
    case null

    /// One key and its value in a map.
    struct Pair: Hashable, Sendable {
        var key: CBOR
        var value: CBOR
    }

    /// Why some bytes are not a CBOR item the decoder accepts. The cases are stable: tests and logs name them.
    enum Error: Swift.Error, Hashable, Sendable {
        /// The input ended inside an item, or an item declared more bytes or elements than remain.
        case truncated
        /// An indefinite-length string, array or map (additional information 31).
        case indefiniteLength
        /// An argument not in its shortest form (RFC 8949 §4.2.1), which would let one value have two encodings.
        case nonMinimal
        /// A tag, a float, undefined, a simple value, a reserved head, or a map key that is not an integer or text.
        case unsupportedType
        /// A text string that is not valid UTF-8.
        case invalidUTF8
        /// A map with the same key twice.
        case duplicateKey
        /// Arrays and maps nested deeper than the limit.
        case tooDeep
        /// Input longer than the limit.
        case tooLarge
        /// Bytes after the item where none may follow.
        case trailingBytes
    }

    /// Nesting allowed by default: WebAuthn's deepest structure (attestation object, statement, certificate
    /// chain) uses three levels.
    static let defaultMaxDepth = 8
    /// The longest input decoded: authenticators keep their responses far below this.
    static let maxInputBytes = 64 * 1024

    /// Decodes `bytes`, which must hold exactly one item.
    static func decode(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth) throws(Error) -> CBOR {
        try decode(bytes[...], maxDepth: maxDepth)
    }

    /// Decodes `bytes`, which must hold exactly one item.
    static func decode(_ bytes: ArraySlice<UInt8>, maxDepth: Int = defaultMaxDepth) throws(Error) -> CBOR {
        let (value, length) = try decodePrefix(bytes, maxDepth: maxDepth)
        guard length == bytes.count else { throw .trailingBytes }
        return value
    }

    /// Decodes the item at the start of `bytes` and returns it with the number of bytes it used, for formats that
    /// put more after it (authenticator data: the credential's key, then the extensions).
    static func decodePrefix(
        _ bytes: ArraySlice<UInt8>, maxDepth: Int = defaultMaxDepth
    ) throws(Error) -> (value: CBOR, length: Int) {
        guard bytes.count <= maxInputBytes else { throw .tooLarge }
        var reader = Reader(bytes: bytes, maxDepth: maxDepth)
        let value = try reader.item(depth: 0)
        return (value, reader.index - bytes.startIndex)
    }
}

extension CBOR {
    /// The value under a text key, if this is a map that has it.
    subscript(text key: String) -> CBOR? {
        self[.text(key)]
    }

    /// The value under an integer key (COSE labels), if this is a map that has it.
    subscript(int key: Int) -> CBOR? {
        self[key >= 0 ? .unsigned(UInt64(key)) : .negative(UInt64(-1 - key))]
    }

    private subscript(key: CBOR) -> CBOR? {
        guard case .map(let pairs) = self else { return nil }
        return pairs.first { $0.key == key }?.value
    }

    /// The integer, if this is one that fits in `Int`.
    var intValue: Int? {
        switch self {
        case .unsigned(let n): return n <= UInt64(Int.max) ? Int(n) : nil
        case .negative(let n): return n <= UInt64(Int.max) ? -1 - Int(n) : nil
        default: return nil
        }
    }

    /// The bytes, if this is a byte string.
    var bytesValue: [UInt8]? {
        guard case .bytes(let bytes) = self else { return nil }
        return bytes
    }

    /// The string, if this is a text string.
    var textValue: String? {
        guard case .text(let text) = self else { return nil }
        return text
    }

    /// The pairs, if this is a map.
    var mapPairs: [Pair]? {
        guard case .map(let pairs) = self else { return nil }
        return pairs
    }
}

extension CBOR {
    /// A cursor over the input. Every length is checked against the bytes that remain before anything is read or
    /// allocated, and nesting is counted before each descent.
    private struct Reader {
        let bytes: ArraySlice<UInt8>
        let maxDepth: Int
        var index: Int

        init(bytes: ArraySlice<UInt8>, maxDepth: Int) {
            self.bytes = bytes
            self.maxDepth = maxDepth
            self.index = bytes.startIndex
        }

        var remaining: Int { bytes.endIndex - index }

        /// The item at the cursor; `depth` is the number of arrays and maps around it.
        mutating func item(depth: Int) throws(Error) -> CBOR {
            let initial = try byte()
            let major = initial >> 5
            let info = initial & 0x1f
            if info == 31 { throw major >= 2 && major <= 5 ? .indefiniteLength : .unsupportedType }
            switch major {
            case 0:
                return .unsigned(try argument(info))
            case 1:
                return .negative(try argument(info))
            case 2:
                return .bytes(Array(try take(argument(info))))
            case 3:
                let utf8 = try take(argument(info))
                let text = String(decoding: utf8, as: UTF8.self)
                // Decoding repairs invalid sequences with U+FFFD, so only valid UTF-8 comes back unchanged.
                guard text.utf8.elementsEqual(utf8) else { throw .invalidUTF8 }
                return .text(text)
            case 4:
                let count = try count(argument(info), bytesPerElement: 1)
                guard depth < maxDepth else { throw .tooDeep }
                var elements: [CBOR] = []
                for _ in 0..<count { elements.append(try item(depth: depth + 1)) }
                return .array(elements)
            case 5:
                let count = try count(argument(info), bytesPerElement: 2)
                guard depth < maxDepth else { throw .tooDeep }
                var pairs: [Pair] = []
                var keys: Set<CBOR> = []
                for _ in 0..<count {
                    let key = try item(depth: depth + 1)
                    switch key {
                    case .unsigned, .negative, .text: break
                    default: throw .unsupportedType
                    }
                    guard keys.insert(key).inserted else { throw .duplicateKey }
                    pairs.append(Pair(key: key, value: try item(depth: depth + 1)))
                }
                return .map(pairs)
            case 6:
                throw .unsupportedType
            default:
                switch info {
                case 20: return .bool(false)
                case 21: return .bool(true)
                case 22: return .null
                default: throw .unsupportedType
                }
            }
        }

        /// The head's argument: the value itself below 24, else the 1, 2, 4 or 8 bytes that follow, which must be
        /// the shortest that can hold it.
        mutating func argument(_ info: UInt8) throws(Error) -> UInt64 {
            let width: Int
            switch info {
            case 0..<24: return UInt64(info)
            case 24: width = 1
            case 25: width = 2
            case 26: width = 4
            case 27: width = 8
            default: throw .unsupportedType
            }
            var value: UInt64 = 0
            for byte in try take(UInt64(width)) { value = value << 8 | UInt64(byte) }
            let smallest: UInt64 = width == 1 ? 24 : 1 << (UInt64(width) * 4)
            guard value >= smallest else { throw .nonMinimal }
            return value
        }

        /// A declared element count, refused when the elements could not fit in what remains (each takes at
        /// least `bytesPerElement` bytes). Nothing is reserved ahead: memory grows with the items actually read.
        func count(_ declared: UInt64, bytesPerElement: UInt64) throws(Error) -> Int {
            guard declared <= UInt64(remaining) / bytesPerElement else { throw .truncated }
            return Int(declared)
        }

        mutating func byte() throws(Error) -> UInt8 {
            guard index < bytes.endIndex else { throw .truncated }
            defer { index += 1 }
            return bytes[index]
        }

        mutating func take(_ length: UInt64) throws(Error) -> ArraySlice<UInt8> {
            guard length <= UInt64(remaining) else { throw .truncated }
            let end = index + Int(length)
            defer { index = end }
            return bytes[index..<end]
        }
    }
}
