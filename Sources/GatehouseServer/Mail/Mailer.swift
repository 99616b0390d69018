import Foundation
import Logging
import SQLKit

/// The mails Gatehouse sends, rendered as plain text and HTML, and queued for the worker that sends them.
struct Mailer: Sendable {
    let queue: MailQueue
    let from: String
    let productName = "Gatehouse"

    /// Which mail to write. Codes and links appear only in the mail body, never in logs.
    enum Template {
        case signupConfirmation(code: String, link: String)
        case magicLink(code: String, link: String)
        case recovery(code: String, link: String)
        case emailChange(code: String, link: String, newEmail: String)
        case reauthentication(code: String)
        case signupAttempt(signInLink: String)
        case emailChangeRequested(newEmail: String)
    }

    /// Queues the mail in the caller's transaction (`AccountsEnvironment.transactionQueuingMail` wakes the worker).
    func enqueue(_ template: Template, to recipient: String, db: any SQLDatabase) async throws {
        try await queue.enqueue(render(template, to: recipient), db: db)
    }

    /// Whether `address` can be delivered at all: a non-ASCII address needs a server that offers SMTPUTF8.
    func canDeliver(to address: String) async -> Bool {
        if address.utf8.allSatisfy({ $0 < 0x80 }) { return true }
        return await queue.transport.acceptsInternationalAddresses()
    }

    func render(_ template: Template, to recipient: String) -> MailMessage {
        let (subject, lines, action): (String, [String], (label: String, url: String)?)
        switch template {
        case .signupConfirmation(let code, let link):
            subject = "Confirm your email"
            lines = [
                "Welcome! Enter this code in the app to confirm your email address:", code,
                "Or open the link below on this device. The code and link expire in 10 minutes.",
            ]
            action = ("Confirm my email", link)
        case .magicLink(let code, let link):
            subject = "Your sign-in code"
            lines = [
                "Enter this code in the app to sign in:", code,
                "Or open the link below on this device. The code and link expire in 10 minutes.",
            ]
            action = ("Sign in", link)
        case .recovery(let code, let link):
            subject = "Reset your password"
            lines = [
                "Someone asked to reset the password of this account. If it was you, enter this code:", code,
                "Or open the link below. If it was not you, ignore this mail: nothing changes.",
            ]
            action = ("Reset my password", link)
        case .emailChange(let code, let link, let newEmail):
            subject = "Confirm your new email address"
            lines = [
                "Confirm that \(newEmail) is the new address of your account with this code:", code,
                "Or open the link below. The code and link expire in 10 minutes.",
            ]
            action = ("Confirm the new address", link)
        case .reauthentication(let code):
            subject = "Confirm it is you"
            lines = ["Enter this code to confirm a change to your account:", code, "It expires in 10 minutes."]
            action = nil
        case .emailChangeRequested(let newEmail):
            subject = "Your email address is being changed"
            lines = [
                "Someone signed in to your account asked to change its email address to \(newEmail).",
                "If it was you, confirm with the code sent to the new address. If not, change your password "
                    + "and sign out everywhere: the address stays as it is until the new one is confirmed.",
            ]
            action = nil
        case .signupAttempt(let signInLink):
            subject = "Someone tried to sign up with your email"
            lines = [
                "Someone tried to create an account with this email address, which already has one.",
                "If it was you, sign in instead. If not, you need not do anything: your account is unchanged.",
            ]
            action = ("Sign in", signInLink)
        }
        var text = lines.joined(separator: "\n\n")
        if let action { text += "\n\n\(action.label): \(action.url)" }
        text += "\n\n— \(productName)\n"
        let paragraphs = lines.map { line in
            line.count == 6 && line.allSatisfy(\.isNumber)
                ? "<p style=\"font-size:28px;letter-spacing:6px;font-weight:bold\">\(Self.escape(line))</p>"
                : "<p>\(Self.escape(line))</p>"
        }.joined(separator: "\n")
        let button = action.map { "<p><a href=\"\(Self.escape($0.url))\">\(Self.escape($0.label))</a></p>" } ?? ""
        let html = """
            <!doctype html>
            <html><body style="font-family:-apple-system,Helvetica,Arial,sans-serif">
            \(paragraphs)
            \(button)
            <p style="color:#777">— \(productName)</p>
            </body></html>
            """
        return MailMessage(from: from, to: recipient, subject: subject, text: text, html: html)
    }

    /// Text made safe for HTML content and quoted attribute values, in mails and in the pages links open.
    static func escape(_ value: String) -> String {
        value.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "'", with: "&#39;")
    }
}
