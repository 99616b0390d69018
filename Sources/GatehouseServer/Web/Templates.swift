import Foundation
import Mustache

/// The mustache templates of the pages and the mails: the ones built in, each replaced by a file of the same name
/// under the operator's `--templates-dir` (`pages/NAME.mustache`, `mail/LOCALE/NAME.{subject,text,html}.mustache`).
///
/// Variables are HTML-escaped, except in `.subject` and `.text` templates, which are plain text.
///
/// The pages' words live in string tables, one folder per language (`pages/LOCALE/*.strings`, lines of
/// `key = text`), which a page reads as `{{t.key}}`: a new language is a folder of files, as for mail. A text may
/// name the page's values (`{{email}}`); a key a language lacks falls back to English.
public struct Templates: Sendable {
    public enum Kind: String, Sendable { case pages, mail }

    let pages: MustacheLibrary
    let mail: MustacheLibrary
    /// Every template name, per kind, for `mail preview` and the locale fallback.
    public let pageNames: Set<String>
    public let mailNames: Set<String>
    /// The pages' one script, `pages/passkeys.js` (built in, not replaced by `--templates-dir`): the passkey
    /// buttons of the account and sign-in pages.
    let passkeyScript: String
    /// The pages' string tables by language (`en`, `de`): each text, and its template when it names a value.
    let strings: [String: [String: PageString]]
    /// The languages the pages speak: those with a string table.
    public var pageLanguages: Set<String> { Set(strings.keys) }

    /// Loads the built-in templates, then the overrides in `directory`. A template that does not parse is an error
    /// naming its file, so a typo stops the server at start instead of blanking a mail.
    public static func load(overrides directory: String?) throws -> Templates {
        var pages: [String: String] = [:]
        var mail: [String: String] = [:]
        var script = ""
        var strings: [String: [String: String]] = [:]
        if let bundled = Bundle.module.resourceURL {
            pages = try files(under: bundled.appendingPathComponent("pages").path)
            strings = try stringTables(under: bundled.appendingPathComponent("pages").path)
            mail = try files(under: bundled.appendingPathComponent("templates").path)
            let file = bundled.appendingPathComponent("pages/passkeys.js")
            guard let data = FileManager.default.contents(atPath: file.path) else {
                throw TemplateError(file: file.path, reason: "is missing")
            }
            script = String(decoding: data, as: UTF8.self)
        }
        if let directory {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue
            else { throw TemplateError(file: directory, reason: "is not a directory") }
            let overrides = (directory as NSString).appendingPathComponent("pages")
            pages.merge(try files(under: overrides)) { $1 }
            for (language, table) in try stringTables(under: overrides) {
                strings[language, default: [:]].merge(table) { $1 }
            }
            mail.merge(try files(under: (directory as NSString).appendingPathComponent("mail"))) { $1 }
        }
        return Templates(
            pages: try library(pages), mail: try library(mail), pageNames: Set(pages.keys), mailNames: Set(mail.keys),
            passkeyScript: script, strings: try compile(strings))
    }

    /// The strings of `language` (English for any key it lacks), rendered with the page's `context`.
    func strings(_ language: String, _ context: [String: Any]) -> [String: String] {
        let english = strings["en"] ?? [:]
        let chosen = strings[language] ?? english
        var texts: [String: String] = [:]
        texts.reserveCapacity(english.count)
        for (key, string) in english where chosen[key] == nil { texts[key] = string.text(context) }
        for (key, string) in chosen { texts[key] = string.text(context) }
        return texts
    }

    /// The text of `key` in `language` (English when that language lacks it) with `context`'s values; nil when no
    /// table has the key.
    func text(_ key: String, _ language: String, _ context: [String: Any] = [:]) -> String? {
        (strings[language]?[key] ?? strings["en"]?[key])?.text(context)
    }

    /// The text of `key` in `language`'s own table, without the English fallback: the words of an API refusal
    /// (`error_<code>`), which in English are the API's own message.
    func translation(_ key: String, _ language: String, _ context: [String: Any] = [:]) -> String? {
        strings[language]?[key]?.text(context)
    }

    /// Renders page `name` (HTML).
    func page(_ name: String, _ context: [String: Any]) -> String {
        pages.render(context, withTemplate: name) ?? ""
    }

    /// Renders mail template `name` (`en/magic_link.text`), or nil when there is none.
    func mail(_ name: String, _ context: [String: Any]) -> String? {
        mail.render(context, withTemplate: name)
    }

    private static func files(under directory: String) throws -> [String: String] {
        guard let enumerator = FileManager.default.enumerator(atPath: directory) else { return [:] }
        var found: [String: String] = [:]
        for case let path as String in enumerator where path.hasSuffix(".mustache") {
            let file = (directory as NSString).appendingPathComponent(path)
            guard let data = FileManager.default.contents(atPath: file) else { continue }
            guard let text = String(data: data, encoding: .utf8) else {
                throw TemplateError(file: file, reason: "is not UTF-8")
            }
            found[String(path.dropLast(".mustache".count))] = text
        }
        return found
    }

    /// `pages/LOCALE/NAME.strings` under `directory`, by locale: lines of `key = text`, `#` starting a comment line.
    private static func stringTables(under directory: String) throws -> [String: [String: String]] {
        guard let enumerator = FileManager.default.enumerator(atPath: directory) else { return [:] }
        var tables: [String: [String: String]] = [:]
        for case let path as String in enumerator where path.hasSuffix(".strings") {
            let parts = path.split(separator: "/")
            guard parts.count == 2 else { continue }
            let file = (directory as NSString).appendingPathComponent(path)
            guard let data = FileManager.default.contents(atPath: file),
                let text = String(data: data, encoding: .utf8)
            else { throw TemplateError(file: file, reason: "is not UTF-8") }
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
                guard let equals = trimmed.firstIndex(of: "=") else {
                    throw TemplateError(file: file, reason: "line \(number + 1) is not `key = text`")
                }
                let key = trimmed[..<equals].trimmingCharacters(in: .whitespaces)
                let value = trimmed[trimmed.index(after: equals)...].trimmingCharacters(in: .whitespaces)
                guard !key.isEmpty, key.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") })
                else { throw TemplateError(file: file, reason: "line \(number + 1) has no key of a-z, 0-9 and _") }
                tables[String(parts[0]), default: [:]][key] = value
            }
        }
        return tables
    }

    private static func compile(_ tables: [String: [String: String]]) throws -> [String: [String: PageString]] {
        try tables.mapValues { table in
            try table.mapValues { text in
                guard text.contains("{{") else { return PageString(plain: text, template: nil) }
                do {
                    return PageString(
                        plain: text, template: try MustacheTemplate(string: "{{% CONTENT_TYPE: TEXT}}" + text))
                } catch {
                    throw TemplateError(file: "strings", reason: "text \"\(text)\" does not parse: \(error)")
                }
            }
        }
    }

    private static func library(_ sources: [String: String]) throws -> MustacheLibrary {
        var library = MustacheLibrary()
        for (name, source) in sources {
            let plain = name.hasSuffix(".text") || name.hasSuffix(".subject")
            do {
                try library.register(plain ? "{{% CONTENT_TYPE: TEXT}}" + source : source, named: name)
            } catch {
                throw TemplateError(file: name + ".mustache", reason: "does not parse: \(error)")
            }
        }
        return library
    }
}

/// One text of a string table: plain, or a template naming the page's values (rendered as text; the page escapes it).
struct PageString: Sendable {
    let plain: String
    let template: MustacheTemplate?

    func text(_ context: [String: Any]) -> String { template?.render(context) ?? plain }
}

/// A template that cannot be used, named by its file.
public struct TemplateError: Error, CustomStringConvertible {
    public let file: String
    public let reason: String
    public var description: String { "template \(file) \(reason)" }
}
