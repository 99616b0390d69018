import CSAML
import CXMLSec
import Foundation

/// The XML namespaces SAML 2.0 messages and metadata use.
enum SAMLNamespace {
    static let samlProtocol = "urn:oasis:names:tc:SAML:2.0:protocol"
    static let assertion = "urn:oasis:names:tc:SAML:2.0:assertion"
    static let metadata = "urn:oasis:names:tc:SAML:2.0:metadata"
    static let signature = "http://www.w3.org/2000/09/xmldsig#"
    static let encryption = "http://www.w3.org/2001/04/xmlenc#"
}

/// A document parsed by libxml2 for one call, freed when the value goes away. Parsing never reads the network,
/// substitutes entities or loads a DTD; a document that declares a DOCTYPE at all is refused by `parse`'s callers.
struct SAMLDocument: ~Copyable {
    let pointer: xmlDocPtr

    /// The document, or nil when `bytes` are not well-formed XML (or xmlsec could not start).
    static func parse(_ bytes: [UInt8]) -> SAMLDocument? {
        guard gh_saml_prepare() == 0, bytes.count < Int(Int32.max) else { return nil }
        // NONET: no network; no NOENT or DTDLOAD, so no entity is expanded and no external subset read. Blanks are kept:
        // signed content is canonicalised as it was signed.
        let options = XML_PARSE_NONET.rawValue | XML_PARSE_NOERROR.rawValue | XML_PARSE_NOWARNING.rawValue
        let document = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { characters in
                xmlReadMemory(characters.baseAddress, Int32(characters.count), nil, nil, Int32(options))
            }
        }
        return document.map { SAMLDocument(pointer: $0) }
    }

    private init(pointer: xmlDocPtr) { self.pointer = pointer }

    deinit { xmlFreeDoc(pointer) }

    /// Whether the document declares a DOCTYPE (an internal or external subset), which no SAML message needs.
    var hasDoctype: Bool { pointer.pointee.intSubset != nil || pointer.pointee.extSubset != nil }

    /// The root element.
    var root: SAMLNode? { xmlDocGetRootElement(pointer).map(SAMLNode.init) }

    /// Nodes at the document's top level other than the root element: comments, processing instructions, a DTD.
    var hasTopLevelExtras: Bool {
        var node = pointer.pointee.children
        while let current = node {
            if current.pointee.type != XML_ELEMENT_NODE { return true }
            node = current.pointee.next
        }
        return false
    }
}

/// An element of a `SAMLDocument`, read where it stands: its name, its attributes without a namespace, its element
/// children and its text. Valid only while its document lives.
struct SAMLNode {
    let pointer: xmlNodePtr

    init(_ pointer: xmlNodePtr) { self.pointer = pointer }

    var localName: String { String(cString: pointer.pointee.name) }

    var namespace: String? { pointer.pointee.ns.flatMap { $0.pointee.href }.map { String(cString: $0) } }

    func `is`(_ name: String, in namespace: String) -> Bool { localName == name && self.namespace == namespace }

    /// The value of the attribute `name` that has no namespace prefix.
    func attribute(_ name: String) -> String? { attributeNode(name).map(Self.value) }

    /// The attribute `name` without a namespace.
    func attributeNode(_ name: String) -> xmlAttrPtr? {
        var attribute = pointer.pointee.properties
        while let current = attribute {
            if current.pointee.ns == nil, String(cString: current.pointee.name) == name { return current }
            attribute = current.pointee.next
        }
        return nil
    }

    /// An attribute's value: its text children (no entity can be among them, as no DTD is loaded).
    static func value(of attribute: xmlAttrPtr) -> String {
        var text = ""
        var child = attribute.pointee.children
        while let current = child {
            if let content = current.pointee.content { text += String(cString: content) }
            child = current.pointee.next
        }
        return text
    }

    /// The element children, in order.
    var elements: [SAMLNode] {
        var found: [SAMLNode] = []
        var child = pointer.pointee.children
        while let current = child {
            if current.pointee.type == XML_ELEMENT_NODE { found.append(SAMLNode(current)) }
            child = current.pointee.next
        }
        return found
    }

    func children(_ name: String, in namespace: String) -> [SAMLNode] {
        elements.filter { $0.is(name, in: namespace) }
    }

    /// The one child `name`, nil when there is none; two of them is a malformed message.
    func child(_ name: String, in namespace: String) throws(SAMLRefusal) -> SAMLNode? {
        let found = children(name, in: namespace)
        guard found.count <= 1 else { throw .malformed("more than one \(name)") }
        return found.first
    }

    /// The element's text with surrounding white space trimmed, or nil when it holds anything but text (an element,
    /// a comment, an entity reference): a value is never pieced together around other nodes.
    var text: String? {
        var text = ""
        var child = pointer.pointee.children
        while let current = child {
            guard current.pointee.type == XML_TEXT_NODE || current.pointee.type == XML_CDATA_SECTION_NODE else {
                return nil
            }
            if let content = current.pointee.content { text += String(cString: content) }
            child = current.pointee.next
        }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The text of every text node below the element, comments and elements skipped (for metadata, which an
    /// administrator supplies and no signature covers).
    var looseText: String {
        var text = ""
        var child = pointer.pointee.children
        while let current = child {
            if current.pointee.type == XML_TEXT_NODE || current.pointee.type == XML_CDATA_SECTION_NODE,
                let content = current.pointee.content
            {
                text += String(cString: content)
            } else if current.pointee.type == XML_ELEMENT_NODE {
                text += SAMLNode(current).looseText
            }
            child = current.pointee.next
        }
        return text
    }
}

/// SAML's xs:dateTime values: UTC with `Z` (an offset is accepted, none is read as UTC), fractional seconds of any
/// length (AD FS sends seven digits).
enum SAMLTime {
    private static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    static func parse(_ text: String) -> Date? {
        let pattern = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})?$/
        guard let match = text.wholeMatch(of: pattern), let year = Int(match.1), let month = Int(match.2),
            let day = Int(match.3), let hour = Int(match.4), let minute = Int(match.5), let second = Int(match.6),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        let components = DateComponents(
            calendar: utc, timeZone: utc.timeZone, year: year, month: month, day: day, hour: hour, minute: minute,
            second: second)
        guard var date = utc.date(from: components), utc.component(.day, from: date) == day else { return nil }
        if let fraction = match.7, let value = Double("0" + fraction) { date += value }
        if let zone = match.8, zone != "Z" {
            let sign: Double = zone.hasPrefix("-") ? -1 : 1
            let parts = zone.dropFirst().split(separator: ":").compactMap { Double($0) }
            guard parts.count == 2, parts[0] < 24, parts[1] < 60 else { return nil }
            date -= sign * (parts[0] * 3600 + parts[1] * 60)
        }
        return date
    }

    /// `2025-01-31T12:00:00Z`, whole seconds.
    static func format(_ date: Date) -> String {
        let parts = utc.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        func two(_ value: Int?) -> String { value.map { $0 < 10 ? "0\($0)" : "\($0)" } ?? "00" }
        let year = String(parts.year ?? 1970)
        return
            "\(year)-\(two(parts.month))-\(two(parts.day))T\(two(parts.hour)):\(two(parts.minute)):\(two(parts.second))Z"
    }
}

/// Escapes text for XML content and attribute values (both quote kinds).
func samlEscape(_ text: String) -> String {
    var escaped = ""
    escaped.reserveCapacity(text.utf8.count)
    for character in text.unicodeScalars {
        switch character {
        case "&": escaped += "&amp;"
        case "<": escaped += "&lt;"
        case ">": escaped += "&gt;"
        case "\"": escaped += "&quot;"
        case "'": escaped += "&apos;"
        case "\r": escaped += "&#13;"
        case "\n": escaped += "&#10;"
        case "\t": escaped += "&#9;"
        default: escaped.unicodeScalars.append(character)
        }
    }
    return escaped
}
