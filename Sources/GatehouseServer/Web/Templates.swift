import Foundation
import Mustache

/// The mustache templates of the pages and the mails: the ones built in, each replaced by a file of the same name
/// under the operator's `--templates-dir` (`pages/NAME.mustache`, `mail/LOCALE/NAME.{subject,text,html}.mustache`).
///
/// Variables are HTML-escaped, except in `.subject` and `.text` templates, which are plain text.
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

    /// Loads the built-in templates, then the overrides in `directory`. A template that does not parse is an error
    /// naming its file, so a typo stops the server at start instead of blanking a mail.
    public static func load(overrides directory: String?) throws -> Templates {
        var pages: [String: String] = [:]
        var mail: [String: String] = [:]
        var script = ""
        if let bundled = Bundle.module.resourceURL {
            pages = try files(under: bundled.appendingPathComponent("pages").path)
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
            pages.merge(try files(under: (directory as NSString).appendingPathComponent("pages"))) { $1 }
            mail.merge(try files(under: (directory as NSString).appendingPathComponent("mail"))) { $1 }
        }
        return Templates(
            pages: try library(pages), mail: try library(mail), pageNames: Set(pages.keys), mailNames: Set(mail.keys),
            passkeyScript: script)
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

/// A template that cannot be used, named by its file.
public struct TemplateError: Error, CustomStringConvertible {
    public let file: String
    public let reason: String
    public var description: String { "template \(file) \(reason)" }
}
