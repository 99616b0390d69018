import Foundation

// libFuzzer's entry for the passkey parsers, built by scripts/fuzz-cbor.sh with CBOR.swift and
// WebAuthnMessages.swift (outside Sources/, so SwiftPM never builds it). Every input goes to the CBOR decoder and to
// each parser of what browsers send; a crash, a sanitizer report or a broken invariant is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPasskeyParsers(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    checkCBOR(bytes)
    parse { () throws(WebAuthnError) in try AuthenticatorData(bytes: bytes) }
    parse { () throws(WebAuthnError) in try AttestationObject(bytes: bytes) }
    parse { () throws(WebAuthnError) in try COSEKey(bytes: bytes) }
    parse { () throws(WebAuthnError) in try ClientData(json: bytes) }
    parse { () throws(WebAuthnError) in try RegistrationResponse(json: Data(bytes)) }
    parse { () throws(WebAuthnError) in try AuthenticationResponse(json: Data(bytes)) }
    if let decoded = WebAuthn.base64URLDecoded(String(decoding: bytes, as: UTF8.self)) {
        // Each byte string has one spelling: decoding what was accepted and encoding it again gives the input back.
        let encoded = Data(decoded).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        precondition(bytes.last == UInt8(ascii: "=") || Array(encoded.utf8) == bytes, "base64url has two spellings")
    }
    return 0
}

/// Runs a parser; a refusal must describe itself without crashing.
private func parse<T>(_ body: () throws(WebAuthnError) -> T) {
    do { _ = try body() } catch { precondition(!error.description.isEmpty) }
}

/// The decoder's invariants: a prefix it accepts is counted within the input, decodes alone to the same item, and
/// encodes back to exactly its bytes (shortest form, definite lengths, pairs in order: one encoding per item).
private func checkCBOR(_ bytes: [UInt8]) {
    guard let (value, length) = try? CBOR.decodePrefix(bytes[...]) else { return }
    precondition(length > 0 && length <= bytes.count, "prefix length out of range")
    precondition((try? CBOR.decode(bytes[..<length])) == value, "prefix does not decode alone")
    precondition(encode(value) == Array(bytes[..<length]), "decoded item does not encode back to its bytes")
    if length == bytes.count {
        precondition((try? CBOR.decode(bytes)) == value, "decode and decodePrefix disagree")
    } else {
        precondition((try? CBOR.decode(bytes)) == nil, "trailing bytes accepted")
    }
}

private func encode(_ item: CBOR) -> [UInt8] {
    func head(_ major: UInt8, _ argument: UInt64) -> [UInt8] {
        let width: Int
        switch argument {
        case 0..<24: return [major << 5 | UInt8(argument)]
        case ...0xff: width = 1
        case ...0xffff: width = 2
        case ...0xffff_ffff: width = 4
        default: width = 8
        }
        let info: UInt8 = width == 1 ? 24 : width == 2 ? 25 : width == 4 ? 26 : 27
        return [major << 5 | info] + (0..<width).reversed().map { UInt8(truncatingIfNeeded: argument >> ($0 * 8)) }
    }
    switch item {
    case .unsigned(let value): return head(0, value)
    case .negative(let value): return head(1, value)
    case .bytes(let bytes): return head(2, UInt64(bytes.count)) + bytes
    case .text(let text): return head(3, UInt64(text.utf8.count)) + text.utf8
    case .array(let items): return head(4, UInt64(items.count)) + items.flatMap(encode)
    case .map(let pairs): return head(5, UInt64(pairs.count)) + pairs.flatMap { encode($0.key) + encode($0.value) }
    case .bool(let value): return [value ? 0xf5 : 0xf4]
    case .null: return [0xf6]
    }
}
