import Foundation

/// A QR Code model 2 symbol (ISO/IEC 18004:2015) holding UTF-8 text in byte mode.
///
/// Written by hand so the server can draw enrolment codes (`otpauth://` URIs)
/// without a package. It follows the standard's encoding procedure (§7.1):
/// the smallest version 1–40 that holds the bytes at the requested level,
/// Reed–Solomon blocks interleaved per Table 9, and the data mask with the
/// lowest penalty score (§7.8.3). Byte mode only: the URIs and names it is
/// for are short, and one mode keeps the encoder small and easy to check.
struct QRCode: Sendable, Equatable {
    /// Error-correction level (§5.3.8): the share of codewords that may be damaged and still decode.
    enum Correction: Sendable, CaseIterable {
        /// About 7 % recoverable.
        case low
        /// About 15 % recoverable; the usual choice for screens.
        case medium
        /// About 25 % recoverable.
        case quartile
        /// About 30 % recoverable.
        case high

        /// Row in the capacity tables below, which list L, M, Q, H in that order.
        fileprivate var tableRow: Int {
            switch self {
            case .low: 0
            case .medium: 1
            case .quartile: 2
            case .high: 3
            }
        }

        /// Indicator in the format information (§7.9.1, Table 12); deliberately not in L, M, Q, H order.
        fileprivate var formatIndicator: Int {
            switch self {
            case .low: 0b01
            case .medium: 0b00
            case .quartile: 0b11
            case .high: 0b10
            }
        }
    }

    /// Why a text cannot be encoded.
    enum Error: Swift.Error, Sendable, Equatable {
        /// The UTF-8 bytes exceed what version 40 holds at the requested level.
        case tooLong
    }

    /// Symbol version, 1–40 (§5.3.1).
    let version: Int
    /// Modules per side, `17 + 4 × version`, quiet zone excluded.
    let size: Int
    /// The error-correction level the symbol was built with.
    let correction: Correction
    /// The data mask pattern 0–7 that scored lowest (§7.8.2).
    let mask: Int
    /// Row-major module colours, `true` for dark.
    private let modules: [Bool]

    /// Encodes `text` as UTF-8 in byte mode, in the smallest version that fits.
    init(_ text: String, correction: Correction = .medium) throws(QRCode.Error) {
        let bytes = Array(text.utf8)
        let fits = { (version: Int) in Self.byteCapacity(version: version, correction: correction) >= bytes.count }
        guard let version = (1...40).first(where: fits) else { throw .tooLong }

        let data = Self.dataCodewords(bytes, version: version, correction: correction)
        var grid = Grid(version: version)
        grid.place(Self.interleave(data, version: version, correction: correction))

        // §7.8.3: try all eight masks, keep the lowest penalty; ties keep the lower mask number.
        var best: (mask: Int, penalty: Int, grid: Grid)?
        for mask in 0..<8 {
            var candidate = grid
            candidate.applyMask(mask)
            candidate.drawFormat(Self.formatBits(correction, mask: mask))
            let penalty = candidate.penalty()
            if best.map({ penalty < $0.penalty }) ?? true { best = (mask, penalty, candidate) }
        }
        let chosen = best ?? (0, 0, grid)  // The loop always runs; this only avoids a force unwrap.

        self.version = version
        self.size = grid.size
        self.correction = correction
        self.mask = chosen.mask
        self.modules = chosen.grid.dark
    }

    /// Whether the module at column `x`, row `y` is dark; anything outside the symbol is the light quiet zone.
    func isDark(x: Int, y: Int) -> Bool {
        guard (0..<size).contains(x), (0..<size).contains(y) else { return false }
        return modules[y * size + x]
    }

    /// A standalone SVG: white background, one black path of horizontal runs, one user unit per module.
    ///
    /// - Parameters:
    ///   - quietZone: light border in modules; the standard asks for at least 4 (§6.3.8).
    ///   - moduleSize: if given, adds `width`/`height` in pixels so the image has an intrinsic size.
    func svg(quietZone: Int = 4, moduleSize: Int? = nil) -> String {
        let border = max(0, quietZone)
        let side = size + 2 * border
        var path = ""
        for y in 0..<size {
            var x = 0
            while x < size {
                guard isDark(x: x, y: y) else { x += 1; continue }
                let start = x
                while isDark(x: x, y: y) { x += 1 }
                path += "M\(start + border) \(y + border)h\(x - start)v1h-\(x - start)z"
            }
        }
        let dimensions = moduleSize.map { " width=\"\(side * max(1, $0))\" height=\"\(side * max(1, $0))\"" } ?? ""
        return """
            <svg xmlns="http://www.w3.org/2000/svg"\(dimensions) viewBox="0 0 \(side) \(side)" shape-rendering="crispEdges">\
            <rect width="\(side)" height="\(side)" fill="#fff"/>\
            <path fill="#000" d="\(path)"/></svg>

            """
    }
}

// MARK: - Capacity (§7.4, Table 7 and Table 9)

/// Error-correction codewords per block, by level (L, M, Q, H) then version; index 0 is unused.
private let ecCodewordsPerBlock: [[Int]] = [
    [
        0, 7, 10, 15, 20, 26, 18, 20, 24, 30, 18, 20, 24, 26, 30, 22, 24, 28, 30, 28, 28, 28, 28, 30, 30, 26, 28, 30,
        30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30,
    ],
    [
        0, 10, 16, 26, 18, 24, 16, 18, 22, 22, 26, 30, 22, 22, 24, 24, 28, 28, 26, 26, 26, 26, 28, 28, 28, 28, 28, 28,
        28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28,
    ],
    [
        0, 13, 22, 18, 26, 18, 24, 18, 22, 20, 24, 28, 26, 24, 20, 30, 24, 28, 28, 26, 30, 28, 30, 30, 30, 30, 28, 30,
        30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30,
    ],
    [
        0, 17, 28, 22, 16, 22, 28, 26, 26, 24, 28, 24, 28, 22, 24, 24, 30, 28, 28, 26, 28, 30, 24, 30, 30, 30, 30, 30,
        30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30,
    ],
]

/// Number of error-correction blocks, by level (L, M, Q, H) then version; index 0 is unused.
private let ecBlockCount: [[Int]] = [
    [
        0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4, 4, 6, 6, 6, 6, 7, 8, 8, 9, 9, 10, 12, 12, 12, 13, 14, 15, 16, 17, 18,
        19, 19, 20, 21, 22, 24, 25,
    ],
    [
        0, 1, 1, 1, 2, 2, 4, 4, 4, 5, 5, 5, 8, 9, 9, 10, 10, 11, 13, 14, 16, 17, 17, 18, 20, 21, 23, 25, 26, 28, 29, 31,
        33, 35, 37, 38, 40, 43, 45, 47, 49,
    ],
    [
        0, 1, 1, 2, 2, 4, 4, 6, 6, 8, 8, 8, 10, 12, 16, 12, 17, 16, 18, 21, 20, 23, 23, 25, 27, 29, 34, 34, 35, 38, 40,
        43, 45, 48, 51, 53, 56, 59, 62, 65, 68,
    ],
    [
        0, 1, 1, 2, 4, 4, 4, 5, 6, 8, 8, 11, 11, 16, 16, 18, 16, 19, 21, 25, 25, 25, 34, 30, 32, 35, 37, 40, 42, 45, 48,
        51, 54, 57, 60, 63, 66, 70, 74, 77, 81,
    ],
]

extension QRCode {
    /// Codewords (data + error correction) a version holds: its area less the function patterns (§7.1, Table 1).
    static func totalCodewords(version: Int) -> Int {
        var modules = (16 * version + 128) * version + 64  // Area less finders, separators, timing, format.
        if version >= 2 {
            let alignments = version / 7 + 2
            modules -= (25 * alignments - 10) * alignments - 55  // Alignment patterns, less their overlap with timing.
            if version >= 7 { modules -= 36 }  // Two version information blocks.
        }
        return modules / 8  // Leftover modules are the remainder bits (§7.7.3).
    }

    /// Data codewords left once the error-correction codewords of a version and level are set aside.
    static func dataCodewordCount(version: Int, correction: Correction) -> Int {
        let row = correction.tableRow
        return totalCodewords(version: version) - ecCodewordsPerBlock[row][version] * ecBlockCount[row][version]
    }

    /// Bits of the byte-mode character count: 8 for versions 1–9, 16 for 10–40 (§7.4.1, Table 3).
    static func countBits(version: Int) -> Int { version < 10 ? 8 : 16 }

    /// Most bytes a version holds at a level: data bits less the mode indicator and the count.
    static func byteCapacity(version: Int, correction: Correction) -> Int {
        (dataCodewordCount(version: version, correction: correction) * 8 - 4 - countBits(version: version)) / 8
    }

    /// The data bit stream (§7.4): mode, count, bytes, terminator, zero bits to a byte, pad codewords.
    static func dataCodewords(_ bytes: [UInt8], version: Int, correction: Correction) -> [UInt8] {
        let capacity = dataCodewordCount(version: version, correction: correction)
        var bits: [Bool] = []
        func append(_ value: Int, count: Int) {
            for i in stride(from: count - 1, through: 0, by: -1) { bits.append((value >> i) & 1 == 1) }
        }
        append(0b0100, count: 4)  // Byte mode indicator (Table 2).
        append(bytes.count, count: countBits(version: version))
        for byte in bytes { append(Int(byte), count: 8) }
        append(0, count: min(4, capacity * 8 - bits.count))  // Terminator, shortened when the symbol is full (§7.4.9).
        append(0, count: (8 - bits.count % 8) % 8)

        var codewords = stride(from: 0, to: bits.count, by: 8).map { start in
            bits[start..<start + 8].reduce(UInt8(0)) { $0 << 1 | ($1 ? 1 : 0) }
        }
        let padCount = capacity - codewords.count
        for index in 0..<padCount { codewords.append(index % 2 == 0 ? 0xEC : 0x11) }  // Pad codewords (§7.4.10).
        return codewords
    }

    /// Splits data into blocks, appends each block's Reed–Solomon codewords, and interleaves them (§7.5.2, §7.6).
    ///
    /// Blocks of one version and level differ by at most one data codeword; the shorter ones come first.
    static func interleave(_ data: [UInt8], version: Int, correction: Correction) -> [UInt8] {
        let blockCount = ecBlockCount[correction.tableRow][version]
        let ecLength = ecCodewordsPerBlock[correction.tableRow][version]
        let total = totalCodewords(version: version)
        let shortBlocks = blockCount - total % blockCount
        let shortDataLength = total / blockCount - ecLength
        let generator = ReedSolomon.generator(degree: ecLength)

        var dataBlocks: [ArraySlice<UInt8>] = []
        var start = data.startIndex
        for index in 0..<blockCount {
            let length = shortDataLength + (index < shortBlocks ? 0 : 1)
            dataBlocks.append(data[start..<start + length])
            start += length
        }
        let ecBlocks = dataBlocks.map { ReedSolomon.remainder(of: $0, generator: generator) }

        var result: [UInt8] = []
        for i in 0...shortDataLength {
            for block in dataBlocks where i < block.count { result.append(block[block.startIndex + i]) }
        }
        for i in 0..<ecLength {
            for block in ecBlocks { result.append(block[i]) }
        }
        return result
    }

    /// Format information (§7.9): level and mask, BCH(15,5) protected, XOR-ed with 101010000010010.
    static func formatBits(_ correction: Correction, mask: Int) -> Int {
        let data = correction.formatIndicator << 3 | mask
        var remainder = data
        for _ in 0..<10 { remainder = (remainder << 1) ^ ((remainder >> 9) * 0x537) }
        return (data << 10 | remainder & 0x3FF) ^ 0x5412
    }

    /// Version information for versions 7–40 (§7.10): six version bits, BCH(18,6) protected.
    static func versionBits(_ version: Int) -> Int {
        var remainder = version
        for _ in 0..<12 { remainder = (remainder << 1) ^ ((remainder >> 11) * 0x1F25) }
        return version << 12 | remainder & 0xFFF
    }

    /// Centres of alignment patterns on each axis (Annex E): 6, then evenly spaced up to `size - 7`.
    static func alignmentCentres(version: Int) -> [Int] {
        guard version >= 2 else { return [] }
        let count = version / 7 + 2
        let last = 17 + 4 * version - 7
        // Annex E's table spaces patterns by an even step; version 32 is the one exception the formula misses.
        let step = version == 32 ? 26 : (version * 4 + count * 2 + 1) / (count * 2 - 2) * 2
        return [6] + (0..<count - 1).reversed().map { last - $0 * step }
    }
}

// MARK: - Reed–Solomon over GF(2⁸) (§7.5.2, Annex A)

/// Error-correction arithmetic in GF(256) with the field's polynomial x⁸ + x⁴ + x³ + x² + 1 (0x11D).
enum ReedSolomon {
    /// Product of two field elements, by shift and add so no tables need building.
    static func multiply(_ x: UInt8, _ y: UInt8) -> UInt8 {
        var product = 0
        for bit in stride(from: 7, through: 0, by: -1) {
            product = (product << 1) ^ ((product >> 7) * 0x11D)
            product ^= ((Int(y) >> bit) & 1) * Int(x)
        }
        return UInt8(product)
    }

    /// Coefficients of ∏(x − αⁱ) for i < degree, highest first, the leading 1 omitted.
    static func generator(degree: Int) -> [UInt8] {
        var coefficients = [UInt8](repeating: 0, count: degree)
        coefficients[degree - 1] = 1
        var root: UInt8 = 1
        for _ in 0..<degree {
            for j in 0..<degree {
                coefficients[j] = multiply(coefficients[j], root)
                if j + 1 < degree { coefficients[j] ^= coefficients[j + 1] }
            }
            root = multiply(root, 2)
        }
        return coefficients
    }

    /// The error-correction codewords: remainder of data·x^degree divided by the generator.
    static func remainder(of data: some Sequence<UInt8>, generator: [UInt8]) -> [UInt8] {
        var remainder = [UInt8](repeating: 0, count: generator.count)
        for byte in data {
            let factor = byte ^ remainder.removeFirst()
            remainder.append(0)
            for i in remainder.indices { remainder[i] ^= multiply(generator[i], factor) }
        }
        return remainder
    }
}

// MARK: - Module grid (§6.3, §7.7, §7.8)

/// The symbol under construction: module colours and which modules belong to function patterns.
private struct Grid {
    let size: Int
    var dark: [Bool]
    /// Function modules, which data placement and masking skip.
    var reserved: [Bool]

    /// A grid with every function pattern drawn and format information reserved.
    init(version: Int) {
        size = 17 + 4 * version
        dark = Array(repeating: false, count: size * size)
        reserved = dark
        for i in 0..<size {  // Timing patterns (§6.3.5), later overdrawn where finders sit.
            setFunction(6, i, i % 2 == 0)
            setFunction(i, 6, i % 2 == 0)
        }
        // Finder patterns with their separators (§6.3.3, §6.3.4): 7×7 rings plus a light border.
        for (cx, cy) in [(3, 3), (size - 4, 3), (3, size - 4)] {
            for dy in -4...4 {
                for dx in -4...4 where (0..<size).contains(cx + dx) && (0..<size).contains(cy + dy) {
                    let ring = max(abs(dx), abs(dy))
                    setFunction(cx + dx, cy + dy, ring != 2 && ring != 4)
                }
            }
        }
        // Alignment patterns (§6.3.6) at every pair of centres, except the three that would hit finders.
        let centres = QRCode.alignmentCentres(version: version)
        for (i, cx) in centres.enumerated() {
            for (j, cy) in centres.enumerated() {
                let last = centres.count - 1
                if (i == 0 && j == 0) || (i == 0 && j == last) || (i == last && j == 0) { continue }
                for dy in -2...2 {
                    for dx in -2...2 { setFunction(cx + dx, cy + dy, max(abs(dx), abs(dy)) != 1) }
                }
            }
        }
        drawFormat(0)  // Reserves the format areas and the dark module; masking redraws them.
        if version >= 7 {  // Version information (§7.10): 6×3 blocks by the upper-right and lower-left finders.
            let bits = QRCode.versionBits(version)
            for i in 0..<18 {
                let bit = (bits >> i) & 1 == 1
                setFunction(size - 11 + i % 3, i / 3, bit)
                setFunction(i / 3, size - 11 + i % 3, bit)
            }
        }
    }

    subscript(x: Int, y: Int) -> Bool { dark[y * size + x] }

    mutating func setFunction(_ x: Int, _ y: Int, _ isDark: Bool) {
        dark[y * size + x] = isDark
        reserved[y * size + x] = true
    }

    /// Writes both copies of the 15 format bits (§7.9.1, Figure 25) and the dark module at (8, size − 8).
    mutating func drawFormat(_ bits: Int) {
        func bit(_ i: Int) -> Bool { (bits >> i) & 1 == 1 }
        for i in 0...5 { setFunction(8, i, bit(i)) }  // Beside the upper-left finder, skipping the timing row.
        setFunction(8, 7, bit(6))
        setFunction(8, 8, bit(7))
        setFunction(7, 8, bit(8))
        for i in 9..<15 { setFunction(14 - i, 8, bit(i)) }
        for i in 0..<8 { setFunction(size - 1 - i, 8, bit(i)) }  // Under the upper-right finder.
        for i in 8..<15 { setFunction(8, size - 15 + i, bit(i)) }  // Beside the lower-left finder.
        setFunction(8, size - 8, true)
    }

    /// Places codewords in two-module columns, zig-zagging up and down from the bottom right (§7.7.3).
    ///
    /// Modules left over once the codewords run out are the remainder bits, which stay light (zero).
    mutating func place(_ codewords: [UInt8]) {
        var bitIndex = 0
        var right = size - 1
        while right >= 1 {
            if right == 6 { right = 5 }  // The vertical timing pattern is skipped as a whole column.
            let upward = (right + 1) & 2 == 0
            for vertical in 0..<size {
                let y = upward ? size - 1 - vertical : vertical
                for x in [right, right - 1] where !reserved[y * size + x] && bitIndex < codewords.count * 8 {
                    dark[y * size + x] = (codewords[bitIndex / 8] >> (7 - bitIndex % 8)) & 1 == 1
                    bitIndex += 1
                }
            }
            right -= 2
        }
    }

    /// Inverts every non-function module where the mask's condition holds (§7.8.2, Table 10).
    mutating func applyMask(_ mask: Int) {
        for y in 0..<size {
            for x in 0..<size where !reserved[y * size + x] {
                let invert: Bool
                switch mask {
                case 0: invert = (x + y) % 2 == 0
                case 1: invert = y % 2 == 0
                case 2: invert = x % 3 == 0
                case 3: invert = (x + y) % 3 == 0
                case 4: invert = (x / 3 + y / 2) % 2 == 0
                case 5: invert = x * y % 2 + x * y % 3 == 0
                case 6: invert = (x * y % 2 + x * y % 3) % 2 == 0
                default: invert = ((x + y) % 2 + x * y % 3) % 2 == 0
                }
                if invert { dark[y * size + x].toggle() }
            }
        }
    }

    /// Penalty score of the finished symbol (§7.8.3, Table 11); lower reads more reliably.
    func penalty() -> Int {
        let rows = (0..<size).map { y in (0..<size).map { x in self[x, y] } }
        let columns = (0..<size).map { x in (0..<size).map { y in self[x, y] } }
        var score = 0
        let finderLike: [Bool] = [true, false, true, true, true, false, true, false, false, false, false]
        let finderLikeReversed = Array(finderLike.reversed())
        for line in rows + columns {
            // N1: 3 points for a run of five same-coloured modules, one more per extra module.
            var run = 1
            for i in 1...line.count {
                if i < line.count && line[i] == line[i - 1] {
                    run += 1
                } else {
                    if run >= 5 { score += run - 2 }
                    run = 1
                }
            }
            // N3: 40 points for each 1:1:3:1:1 dark–light pattern with four light modules on one side.
            for start in 0...(line.count - finderLike.count) {
                let window = line[start..<start + finderLike.count]
                if window.elementsEqual(finderLike) || window.elementsEqual(finderLikeReversed) { score += 40 }
            }
        }
        // N2: 3 points for each 2×2 block of one colour (overlapping blocks all count).
        for y in 0..<size - 1 {
            for x in 0..<size - 1 {
                let colour = self[x, y]
                if self[x + 1, y] == colour && self[x, y + 1] == colour && self[x + 1, y + 1] == colour { score += 3 }
            }
        }
        // N4: 10 points for each full 5 % step the dark share strays from 50 %.
        let darkCount = dark.lazy.filter { $0 }.count
        score += abs(darkCount * 20 - size * size * 10) / (size * size) * 10
        return score
    }
}
