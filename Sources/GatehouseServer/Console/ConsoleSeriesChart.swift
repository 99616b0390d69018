import Foundation

/// The overview's charts: bars drawn as SVG by the server, no script. A pure function of its points and words, so
/// its tests need no server.
enum ConsoleChart {
    static let width = 320
    static let height = 120
    /// The bars' area: below the top label, above the time labels.
    static let plotTop = 14.0
    static let plotBottom = 100.0

    /// One chart: a bar per point (oldest first), the largest value at the top left, the range's start and end
    /// times below, and `summary` as its accessible name (`role="img"`, `aria-label` and `<title>`). Every word is
    /// escaped here, so the page may print the result as it is.
    static func svg(points: [Int64], summary: String, maxLabel: String, startLabel: String, endLabel: String)
        -> String
    {
        let largest = max(points.max() ?? 0, 0)
        let slot = Double(width) / Double(max(points.count, 1))
        let gap = slot > 3 ? 1.0 : 0
        var bars = ""
        if largest > 0 {
            for (index, value) in points.enumerated() where value > 0 {
                let tall = Double(value) / Double(largest) * (plotBottom - plotTop)
                bars +=
                    "<rect x=\"\(number(Double(index) * slot))\" y=\"\(number(plotBottom - tall))\" "
                    + "width=\"\(number(max(slot - gap, 0.5)))\" height=\"\(number(tall))\"/>"
            }
        }
        let label = escape(summary)
        return """
            <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 \(width) \(height)" role="img" aria-label="\(label)" \
            focusable="false"><title>\(label)</title>\
            <g fill="currentColor">\(bars)</g>\
            <line x1="0" y1="\(number(plotBottom))" x2="\(width)" y2="\(number(plotBottom))" stroke="currentColor" \
            stroke-width="1" opacity="0.5"/>\
            <g fill="currentColor" font-size="10" font-family="system-ui, sans-serif">\
            <text x="0" y="10">\(escape(maxLabel))</text>\
            <text x="0" y="116">\(escape(startLabel))</text>\
            <text x="\(width)" y="116" text-anchor="end">\(escape(endLabel))</text></g></svg>
            """
    }

    /// A coordinate with at most two decimals, without a trailing ".0".
    static func number(_ value: Double) -> String {
        let rounded = (value * 100).rounded() / 100
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
    }

    /// Text for SVG (XML) content and attributes.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.count)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }
}
