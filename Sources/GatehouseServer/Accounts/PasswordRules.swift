import Foundation

/// What an account password and an email address must be.
struct PasswordRules: Sendable {
    /// The server's policy for account passwords.
    let policy: PasswordPolicy

    /// What joins a refused password's reasons in its `weak_password` message (the password page lists them apart).
    static let reasonSeparator = "; "

    /// Refuses an account password the policy rejects, with Supabase's `weak_password` reasons.
    func checkPassword(_ password: String, email: String) throws {
        try checkPassword(password, forbidden: [email, EmailAddress.localPart(email)], policy: policy)
    }

    /// Refuses a password `policy` rejects (or that holds a NUL, which C hashing would cut short).
    func checkPassword(_ password: String, forbidden: [String], policy: PasswordPolicy) throws {
        guard !password.contains("\u{0}") else {
            throw APIError.validation("A password cannot contain a NUL character")
        }
        let problems = policy.problems(for: password, forbidden: forbidden)
        guard problems.isEmpty else {
            throw APIError(
                .unprocessableContent, code: .weakPassword,
                message: problems.map { $0.message(for: policy) }.joined(separator: Self.reasonSeparator),
                details: ["weak_password": .object(["reasons": .array(problems.map { .string($0.rawValue) })])])
        }
    }

    /// The address normalized, or a `validation_failed` error.
    static func validEmail(_ raw: String) throws -> String {
        guard let email = EmailAddress.normalize(raw) else {
            throw APIError.validation("Unable to validate email address: invalid format")
        }
        return email
    }
}
