import Foundation

/// Which URLs a mailed link may send its tokens to. Each allowed entry is parsed once; a candidate must have the
/// same scheme, host and port exactly, no user information, and a path the entry's path admits. A `*` is a wildcard
/// only inside the path (`https://app.example/auth/*`); an entry like `https://app.example*` admits any path on
/// exactly that origin and nothing on `app.example.evil.test`. Custom app schemes (`myapp://callback`) match exactly.
struct RedirectAllowList: Sendable {
    struct Entry: Sendable, Equatable {
        let scheme: String
        let host: String
        let port: Int?
        /// The path with `*` wildcards, or nil for any path.
        let pathPattern: String?
    }

    let entries: [Entry]

    /// The configured patterns, plus the site URL itself and any path below it.
    init(_ patterns: [String], site: String) {
        let site = site.hasSuffix("/") ? String(site.dropLast()) : site
        self.init(patterns + [site, site + "/*"])
    }

    /// Parses `patterns`; those that name no scheme and host are dropped (configuration refuses them earlier).
    init(_ patterns: [String]) {
        entries = patterns.compactMap(Self.entry)
    }

    static func entry(_ pattern: String) -> Entry? {
        // The first `*` ends the literal part; it must come after the authority.
        let literal: Substring
        var wildcardTail = ""
        if let star = pattern.firstIndex(of: "*") {
            literal = pattern[..<star]
            wildcardTail = String(pattern[star...])
        } else {
            literal = pattern[...]
        }
        guard let parsed = parse(String(literal)) else { return nil }
        let authorityEnded = literal.range(of: "://").map { literal[$0.upperBound...].contains("/") } ?? false
        if !wildcardTail.isEmpty, !authorityEnded {
            // `https://app.example*`: any path on exactly this origin.
            return Entry(scheme: parsed.scheme, host: parsed.host, port: parsed.port, pathPattern: nil)
        }
        return Entry(
            scheme: parsed.scheme, host: parsed.host, port: parsed.port, pathPattern: parsed.path + wildcardTail)
    }

    /// Whether `candidate` may receive tokens.
    func admits(_ candidate: String) -> Bool {
        guard let url = Self.parse(candidate) else { return false }
        return entries.contains { entry in
            entry.scheme == url.scheme && entry.host == url.host && entry.port == url.port
                && (entry.pathPattern.map { Self.glob($0, matches: url.path) } ?? true)
        }
    }

    struct ParsedURL {
        let scheme: String
        let host: String
        let port: Int?
        let path: String
    }

    /// Scheme, lower-cased host, port and path; nil for anything with user information, a backslash, white space or
    /// control characters, or no host.
    static func parse(_ text: String) -> ParsedURL? {
        guard !text.isEmpty, text.unicodeScalars.allSatisfy({ $0.value > 32 && $0.value != 127 && $0 != "\\" }),
            let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            let host = components.host?.lowercased(), !host.isEmpty,
            components.user == nil, components.password == nil
        else { return nil }
        let path = components.percentEncodedPath
        // Dot segments could climb out of an allowed path prefix.
        guard
            !path.split(separator: "/").contains(where: { $0 == ".." || $0 == "." || $0.lowercased().contains("%2e") })
        else { return nil }
        return ParsedURL(scheme: scheme, host: host, port: components.port ?? defaultPort(scheme), path: path)
    }

    private static func defaultPort(_ scheme: String) -> Int? {
        switch scheme {
        case "http": 80
        case "https": 443
        default: nil
        }
    }

    /// `*` matches any run of characters; everything else literally.
    static func glob(_ pattern: String, matches text: String) -> Bool {
        let pieces = pattern.split(separator: "*", omittingEmptySubsequences: false).map(String.init)
        guard pieces.count > 1 else { return pattern == text }
        guard text.hasPrefix(pieces[0]) else { return false }
        var rest = text.dropFirst(pieces[0].count)
        for piece in pieces.dropFirst().dropLast() where !piece.isEmpty {
            guard let range = rest.range(of: piece) else { return false }
            rest = rest[range.upperBound...]
        }
        let last = pieces[pieces.count - 1]
        return last.isEmpty || rest.hasSuffix(last)
    }
}
