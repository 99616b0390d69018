import Foundation
import GatehouseAPI
import HTTPTypes

/// What an auth hook's answer means, decided without I/O from its status, content type and body, as GoTrue's HTTP
/// hook dispatcher decides it: the JSON object to use, a retry (429 or 503 with `Retry-After`), or the request's
/// failure. Every hook fails closed: anything but a usable JSON answer fails the request that called it.
enum AuthHookAnswer {
    /// The most bytes an answer may have: 200 KB, as GoTrue.
    static let sizeLimit = 200 * 1024

    /// What to do with one try's answer.
    enum Verdict: Equatable {
        /// The answer's JSON object (`{}` for a 204 or an empty body).
        case answer(JSONFields)
        /// Busy: another try, while tries and time remain.
        case retry
    }

    /// Decides on one answer. `body` holds at most `sizeLimit + 1` bytes: one more than the limit says it was longer.
    static func decide(status: Int, contentType: String?, retryAfter: String?, body: [UInt8]) throws(APIError)
        -> Verdict
    {
        switch status {
        case 200, 202, 204:
            guard let contentType, !contentType.isEmpty else {
                if status == 204 { return .answer([:]) }
                throw APIError(
                    .badRequest, code: .hookPayloadInvalidContentType,
                    message: "Invalid Content-Type: Missing Content-Type header")
            }
            guard mediaType(contentType) == "application/json" else {
                throw APIError(
                    .badRequest, code: .hookPayloadInvalidContentType,
                    message: "Invalid JSON response. Received content-type: \(contentType)")
            }
            guard body.count <= sizeLimit else {
                throw APIError(
                    .unprocessableContent, code: .hookPayloadOverSizeLimit,
                    message: "Payload size exceeded size limit of \(sizeLimit) bytes")
            }
            let object = try json(body)
            try checkError(object)
            return .answer(object)
        case 429, 503:
            if let retryAfter, !retryAfter.isEmpty { return .retry }
            throw failed("Service currently unavailable due to hook")
        case 400: throw failed("Invalid payload sent to hook")
        case 401: throw failed("Hook requires authorization token")
        default: throw failed("Unexpected status code returned from hook: \(status)")
        }
    }

    /// The answer's JSON object; an empty body is `{}`.
    static func json(_ body: [UInt8]) throws(APIError) -> JSONFields {
        guard body.contains(where: { !($0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D) }) else { return [:] }
        guard let object = try? JSONDecoder().decode(JSONFields.self, from: Data(body)) else {
            throw failed("Error unmarshaling JSON output.")
        }
        return object
    }

    /// A hook's own refusal, `{"error": {"http_code", "message"}}`: the request fails with that status (a 4xx or 5xx;
    /// anything else is 500) and message. As GoTrue, an error without a message is no error.
    static func checkError(_ object: JSONFields) throws(APIError) {
        guard case .object(let error)? = object["error"], case .string(let message)? = error["message"],
            !message.isEmpty
        else { return }
        var status = 500
        if case .int(let code)? = error["http_code"], (400...599).contains(code) { status = Int(code) }
        throw APIError(HTTPResponse.Status(code: status), code: .hookFailed, message: message)
    }

    /// The media type of a `Content-Type` value, lowercased, without parameters.
    static func mediaType(_ contentType: String) -> String {
        contentType.prefix { $0 != ";" }.trimmingHTTPWhitespace.lowercased()
    }

    /// A hook answer Gatehouse cannot use: 500, as GoTrue answers it.
    static func failed(_ message: String) -> APIError {
        APIError(.internalServerError, code: .hookFailed, message: message)
    }

    // MARK: Custom access token

    /// The claims a custom access token hook must leave in place, as GoTrue requires them.
    static let requiredClaims = [
        "aud", "exp", "iat", "sub", "email", "phone", "role", "aal", "session_id", "is_anonymous",
    ]

    /// The claims of a custom access token hook's answer `{"claims": {…}}`, checked as GoTrue checks them: the
    /// required claims present, and each known claim of its type.
    static func claims(_ answer: JSONFields) throws(APIError) -> JSONFields {
        guard let value = answer["claims"] else { throw failed("output claims field is missing") }
        guard case .object(let claims) = value else { throw failed("output claims field is not an object") }
        let problems = claimProblems(claims)
        guard problems.isEmpty else {
            throw failed(
                "output claims do not conform to the expected schema: "
                    + problems.map { "- \($0)" }.joined(separator: " "))
        }
        return claims
    }

    /// What is wrong with `claims`: a line per missing required claim or claim of the wrong type; empty when none.
    static func claimProblems(_ claims: JSONFields) -> [String] {
        var problems = requiredClaims.filter { claims[$0] == nil }.map { "\($0) is required" }
        for (name, value) in claims {
            guard let expected = claimTypes[name], !expected.accepts(value) else { continue }
            problems.append("\(name): Invalid type. Expected: \(expected.rawValue)")
        }
        return problems.sorted()
    }

    /// The JSON type a known claim must have.
    enum ClaimType: String {
        case string, integer, boolean, object, array
        case stringOrArray = "array, string"

        func accepts(_ value: JSONValue) -> Bool {
            switch (self, value) {
            case (.string, .string), (.integer, .int), (.boolean, .bool), (.object, .object), (.array, .array),
                (.stringOrArray, .string), (.stringOrArray, .array):
                true
            case (.integer, .double(let number)): number.rounded() == number
            default: false
            }
        }
    }

    /// GoTrue's minimum token schema: the types of the claims it knows.
    static let claimTypes: [String: ClaimType] = [
        "aud": .stringOrArray, "exp": .integer, "jti": .string, "iat": .integer, "iss": .string, "nbf": .integer,
        "sub": .string, "email": .string, "phone": .string, "app_metadata": .object, "user_metadata": .object,
        "role": .string, "aal": .string, "amr": .array, "session_id": .string, "is_anonymous": .boolean,
    ]

    // MARK: Verification attempts

    /// A verification attempt hook's decision: `{"decision": "continue" | "reject", "message", "should_logout_user"}`.
    struct Decision: Equatable {
        let reject: Bool
        let message: String?
        let logOut: Bool

        init(_ answer: JSONFields) {
            reject = answer["decision"]?.stringValue == "reject"
            message = answer["message"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
            if case .bool(true)? = answer["should_logout_user"] { logOut = true } else { logOut = false }
        }
    }
}
