import Foundation
import Testing

@testable import GatehouseServer

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// Pure rules of the encoder, checked against values published in ISO/IEC 18004 and its usual references.
/// Whether whole symbols scan is proven separately by Tests/supabase/test_mfa.py and the browser check, decoding with zxing-cpp.
@Suite struct QRCodeTests {
    // MARK: Version selection (Table 7 byte-mode capacities)

    @Test(arguments: [
        (14, 1), (15, 2), (26, 2), (27, 3), (42, 3), (180, 9),
        // The character count grows from 8 to 16 bits at version 10, so 213 (not 214) fills it.
        (181, 10), (213, 10), (214, 11), (2331, 40),
    ])
    func mediumPicksSmallestVersion(bytes: Int, version: Int) throws {
        let code = try QRCode(String(repeating: "a", count: bytes), correction: .medium)
        #expect(code.version == version)
        #expect(code.size == 17 + 4 * version)
    }

    @Test func everyLevelFillsVersionOneExactly() throws {
        let capacities: [(QRCode.Correction, Int)] = [(.low, 17), (.medium, 14), (.quartile, 11), (.high, 7)]
        for (level, capacity) in capacities {
            #expect(try QRCode(String(repeating: "z", count: capacity), correction: level).version == 1)
            #expect(try QRCode(String(repeating: "z", count: capacity + 1), correction: level).version == 2)
        }
    }

    @Test func capacityCountsUTF8BytesNotCharacters() throws {
        // "é" is two bytes: seven of them fill version 1-M's 14 bytes, one more byte spills into version 2.
        #expect(try QRCode(String(repeating: "é", count: 7)).version == 1)
        #expect(try QRCode(String(repeating: "é", count: 7) + "a").version == 2)
    }

    @Test func characterCountWidensAtVersionTen() {
        #expect(QRCode.countBits(version: 9) == 8)
        #expect(QRCode.countBits(version: 10) == 16)
        #expect(QRCode.countBits(version: 40) == 16)
    }

    @Test func textPastVersionFortyIsTooLong() {
        #expect(throws: QRCode.Error.tooLong) { try QRCode(String(repeating: "x", count: 2954), correction: .low) }
        #expect(throws: QRCode.Error.tooLong) { try QRCode(String(repeating: "x", count: 2332), correction: .medium) }
        #expect(throws: QRCode.Error.tooLong) { try QRCode(String(repeating: "x", count: 1274), correction: .high) }
        #expect((try? QRCode(String(repeating: "x", count: 1273), correction: .high))?.version == 40)
    }

    // MARK: Codewords

    @Test func totalCodewordsMatchTableOne() {
        #expect(QRCode.totalCodewords(version: 1) == 26)
        #expect(QRCode.totalCodewords(version: 7) == 196)
        #expect(QRCode.totalCodewords(version: 14) == 581)
        #expect(QRCode.totalCodewords(version: 40) == 3706)
    }

    @Test func byteModeBitStreamIsPaddedWithAlternatingCodewords() {
        // 0100 | 00000001 | 01000001 ("A") | 0000 terminator, then EC 11 EC 11 … to 16 codewords (1-M).
        let expected: [UInt8] = [0x40, 0x14, 0x10] + (0..<13).map { $0 % 2 == 0 ? 0xEC : 0x11 }
        #expect(QRCode.dataCodewords(Array("A".utf8), version: 1, correction: .medium) == expected)
    }

    @Test func generatorPolynomialOfDegreeSeven() {
        // x⁷ + α⁸⁷x⁶ + α²²⁹x⁵ + α¹⁴⁶x⁴ + α¹⁴⁹x³ + α²³⁸x² + α¹⁰²x + α²¹, as integers.
        #expect(ReedSolomon.generator(degree: 7) == [127, 122, 154, 164, 11, 68, 117])
    }

    @Test func reedSolomonMatchesAnnexIExample() {
        // ISO/IEC 18004 Annex I: "01234567" as 1-M, data codewords and their 10 error-correction codewords.
        let data: [UInt8] = [
            0x10, 0x20, 0x0C, 0x56, 0x61, 0x80, 0xEC, 0x11, 0xEC, 0x11, 0xEC, 0x11, 0xEC, 0x11, 0xEC, 0x11,
        ]
        let expected: [UInt8] = [0xA5, 0x24, 0xD4, 0xC1, 0xED, 0x36, 0xC7, 0x87, 0x2C, 0x55]
        #expect(ReedSolomon.remainder(of: data, generator: ReedSolomon.generator(degree: 10)) == expected)
    }

    @Test func reedSolomonMatchesHelloWorldExample() {
        // The widely published "HELLO WORLD" 1-M example (thonky.com QR tutorial).
        let data: [UInt8] = [32, 91, 11, 120, 209, 114, 220, 77, 67, 64, 236, 17, 236, 17, 236, 17]
        let expected: [UInt8] = [196, 35, 39, 119, 235, 215, 231, 226, 93, 23]
        #expect(ReedSolomon.remainder(of: data, generator: ReedSolomon.generator(degree: 10)) == expected)
    }

    @Test func singleBlockInterleavingIsDataThenErrorCorrection() {
        let data = QRCode.dataCodewords(Array("A".utf8), version: 1, correction: .medium)
        let codewords = QRCode.interleave(data, version: 1, correction: .medium)
        #expect(codewords.count == 26)
        #expect(Array(codewords.prefix(16)) == data)
    }

    @Test func blocksOfUnequalLengthInterleaveShortOnesFirst() {
        // 5-Q: two blocks of 15 data codewords, then two of 16 (Table 9); the 16th column holds only the long ones.
        let data = (0..<62).map { UInt8($0) }
        let codewords = QRCode.interleave(data, version: 5, correction: .quartile)
        #expect(codewords.count == 134)
        #expect(Array(codewords.prefix(4)) == [0, 15, 30, 46])
        #expect(Array(codewords[56..<62]) == [14, 29, 44, 60, 45, 61])
    }

    // MARK: Format and version information (§7.9, §7.10)

    @Test(arguments: [
        (QRCode.Correction.medium, 0, 0b101010000010010),
        (.low, 4, 0b110011000101111),
        (.quartile, 7, 0b010101111101101),
        (.high, 0, 0b001011010001001),
    ])
    func formatInformation(level: QRCode.Correction, mask: Int, bits: Int) {
        #expect(QRCode.formatBits(level, mask: mask) == bits)
    }

    @Test func versionInformation() {
        #expect(QRCode.versionBits(7) == 0b000111110010010100)
        #expect(QRCode.versionBits(40) == 0b101000110001101001)
    }

    @Test func alignmentCentresMatchAnnexE() {
        #expect(QRCode.alignmentCentres(version: 1) == [])
        #expect(QRCode.alignmentCentres(version: 2) == [6, 18])
        #expect(QRCode.alignmentCentres(version: 7) == [6, 22, 38])
        #expect(QRCode.alignmentCentres(version: 32) == [6, 34, 60, 86, 112, 138])
        #expect(QRCode.alignmentCentres(version: 36) == [6, 24, 50, 76, 102, 128, 154])
        #expect(QRCode.alignmentCentres(version: 40) == [6, 30, 58, 86, 114, 142, 170])
    }

    // MARK: Symbol layout

    @Test func functionPatternsSitWhereTheStandardPutsThem() throws {
        let code = try QRCode(String(repeating: "v", count: 120), correction: .medium)  // Version 7.
        #expect(code.version == 7)
        let size = code.size
        for (x, y) in [(0, 0), (size - 7, 0), (0, size - 7)] {  // Finder corners dark, separators light.
            #expect(code.isDark(x: x, y: y) && code.isDark(x: x + 6, y: y + 6) && code.isDark(x: x + 3, y: y + 3))
            #expect(!code.isDark(x: x + 1, y: y + 1))
        }
        #expect(!code.isDark(x: 7, y: 7))
        #expect(code.isDark(x: 8, y: size - 8))  // The dark module.
        for i in 8..<(size - 8) {  // Timing patterns alternate, dark on even positions.
            #expect(code.isDark(x: i, y: 6) == (i % 2 == 0))
            #expect(code.isDark(x: 6, y: i) == (i % 2 == 0))
        }
        let bits = QRCode.versionBits(7)
        for i in 0..<18 {  // Both version information blocks, least significant bit first.
            #expect(code.isDark(x: size - 11 + i % 3, y: i / 3) == ((bits >> i) & 1 == 1))
            #expect(code.isDark(x: i / 3, y: size - 11 + i % 3) == ((bits >> i) & 1 == 1))
        }
        let format = QRCode.formatBits(code.correction, mask: code.mask)
        for i in 0..<8 {  // Second copy of the format information, under the upper-right finder.
            #expect(code.isDark(x: size - 1 - i, y: 8) == ((format >> i) & 1 == 1))
        }
        #expect(!code.isDark(x: -1, y: 0) && !code.isDark(x: 0, y: size))
    }

    @Test func encodingIsDeterministic() throws {
        let uri = "otpauth://totp/Gatehouse:someone%40example.com?secret=JBSWY3DPEHPK3PXP&issuer=Gatehouse"
        #expect(try QRCode(uri) == QRCode(uri))
        #expect(try QRCode(uri).svg() == QRCode(uri).svg())
    }

    // MARK: SVG

    @Test func svgPathCoversExactlyTheDarkModules() throws {
        let code = try QRCode("Gatehouse ✓", correction: .high)
        let svg = code.svg(quietZone: 2)
        let side = code.size + 4
        #expect(svg.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(side) \(side)\""))
        #expect(svg.components(separatedBy: "<path").count == 2)

        // Replay every "Mx yhnv1h-nz" run and compare with isDark, quiet zone included.
        let d = try #require(svg.split(separator: "d=\"").last?.split(separator: "\"").first)
        var painted = Set<Int>()
        for run in d.split(separator: "z") {
            let numbers = run.split(whereSeparator: { "Mhv ".contains($0) }).compactMap { Int($0) }
            try #require(numbers.count == 5 && numbers[3] == 1 && numbers[4] == -numbers[2])
            let (x, y, width) = (numbers[0], numbers[1], numbers[2])
            for column in x..<(x + width) { painted.insert(y * side + column) }
        }
        for y in 0..<side {
            for x in 0..<side {
                #expect(painted.contains(y * side + x) == code.isDark(x: x - 2, y: y - 2))
            }
        }
    }

    @Test func svgSizesOnlyWhenAsked() throws {
        let code = try QRCode("size")
        let openingTag = { (svg: String) in svg.prefix(while: { $0 != ">" }) }
        #expect(!openingTag(code.svg()).contains("width="))
        let side = 5 * (code.size + 8)
        #expect(openingTag(code.svg(moduleSize: 5)).contains(" width=\"\(side)\" height=\"\(side)\" "))
    }

    @Test func svgIsWellFormedXML() throws {
        #if canImport(FoundationXML) || canImport(Darwin)
            let svg = try QRCode("otpauth://totp/Gatehouse:a%40b.c?secret=JBSWY3DPEHPK3PXP").svg(moduleSize: 4)
            let parser = XMLParser(data: Data(svg.utf8))
            let collector = ElementCollector()
            parser.delegate = collector
            #expect(parser.parse(), "XMLParser error: \(String(describing: parser.parserError))")
            #expect(collector.names == ["svg", "rect", "path"])
        #endif
    }
}

#if canImport(FoundationXML) || canImport(Darwin)
    /// Records element names in document order.
    private final class ElementCollector: NSObject, XMLParserDelegate {
        var names: [String] = []

        func parser(
            _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
            qualifiedName qName: String?, attributes attributeDict: [String: String] = [:]
        ) {
            names.append(elementName)
        }
    }
#endif
