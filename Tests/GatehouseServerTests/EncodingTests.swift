import Foundation
import Testing

@testable import GatehouseClient
@testable import GatehouseServer

/// Our base32 and base64url wrappers over ExtrasBase64, held to RFC 4648 §10's test vectors: the server's and the
/// SDK's spell every byte string alike, without padding, and read it back with or without.
@Suite("Base32 and base64url")
struct EncodingTests {
    @Test(
        "base32 as RFC 4648 §10 spells it: unpadded out; padded, unpadded or lower case in",
        arguments: [
            ("", "", ""), ("f", "MY", "MY======"), ("fo", "MZXQ", "MZXQ===="), ("foo", "MZXW6", "MZXW6==="),
            ("foob", "MZXW6YQ", "MZXW6YQ="), ("fooba", "MZXW6YTB", "MZXW6YTB"),
            ("foobar", "MZXW6YTBOI", "MZXW6YTBOI======"),
        ])
    func base32(text: String, unpadded: String, padded: String) {
        let bytes = Array(text.utf8)
        #expect(Base32.encode(bytes) == unpadded)
        #expect(Base32.decode(unpadded) == bytes)
        #expect(Base32.decode(padded) == bytes)
        #expect(Base32.decode(unpadded.lowercased()) == bytes)
    }

    @Test("base32 ignores spaces and padding, and refuses any other character")
    func base32Refusals() {
        #expect(Base32.decode("mzxw 6ytb oi") == Array("foobar".utf8))
        for invalid in ["MZXW1", "MZXW6YTBO8", "MZXW6YTB+OI", "MZXW6YTBOI\t", "MZXW6YTBOI\n", "MZXW-6YTB", "MZXWé"] {
            #expect(Base32.decode(invalid) == nil, "\(invalid.debugDescription)")
        }
    }

    @Test(
        "base64url as RFC 4648 §10 spells it (in the URL alphabet): unpadded out; padded or unpadded in",
        arguments: [
            ("", "", ""), ("f", "Zg", "Zg=="), ("fo", "Zm8", "Zm8="), ("foo", "Zm9v", "Zm9v"),
            ("foob", "Zm9vYg", "Zm9vYg=="), ("fooba", "Zm9vYmE", "Zm9vYmE="), ("foobar", "Zm9vYmFy", "Zm9vYmFy"),
        ])
    func base64URLVectors(text: String, unpadded: String, padded: String) {
        let data = Data(text.utf8)
        #expect(Secrets.base64URL(data) == unpadded)
        #expect(base64URL(data) == unpadded)
        for spelling in [unpadded, padded] {
            #expect(Data(base64URL: spelling) == data)
            #expect(base64URLDecoded(spelling) == data)
            #expect(WebAuthn.base64URLDecoded(spelling) == Array(data))
        }
    }

    @Test("base64url uses - and _ for 62 and 63, and refuses + and /, whitespace and impossible lengths")
    func base64URLAlphabet() {
        let bytes = Data([0xfb, 0xff])
        #expect(Secrets.base64URL(bytes) == "-_8")
        #expect(base64URL(bytes) == "-_8")
        for spelling in ["-_8", "-_8="] {
            #expect(Data(base64URL: spelling) == bytes)
            #expect(base64URLDecoded(spelling) == bytes)
        }
        for invalid in ["+/8", "+/8=", "-_8 ", " -_8", "-_\n8", "A", "Zm9vY", "Zm9v=", "Zm9vYg==="] {
            #expect(Data(base64URL: invalid) == nil, "\(invalid.debugDescription)")
            #expect(base64URLDecoded(invalid) == nil, "\(invalid.debugDescription)")
            #expect(WebAuthn.base64URLDecoded(invalid) == nil, "\(invalid.debugDescription)")
        }
    }

    @Test("the passkey decoder alone refuses stray bits in the last character: one spelling per byte string")
    func strictPasskeyDecoder() {
        // "-_9" differs from "-_8" only in bits no byte holds.
        #expect(WebAuthn.base64URLDecoded("-_8") == [0xfb, 0xff])
        #expect(WebAuthn.base64URLDecoded("-_9") == nil)
        #expect(WebAuthn.base64URLDecoded("Zg=") == nil)
    }
}
