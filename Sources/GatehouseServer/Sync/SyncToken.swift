import Crypto
import Foundation

/// A change token: where a device is in its company's change log, and what it was allowed to see there. Opaque to
/// clients and signed, so a device cannot claim another company or a wider view. It lives with the device, not in a
/// node: restarts and deploys never invalidate it.
struct SyncToken: Codable, Sendable, Equatable {
    /// The company.
    var company: String
    /// The member it was issued to: another member's token is refused.
    var account: String
    /// The seq the device has every change up to.
    var seq: Int64
    /// The member's access epoch when the token was issued.
    var epoch: Int64
    /// The visibility mask the device's data was filtered with.
    var mask: Int64
    /// The record types the device syncs, sorted; nil for all.
    var types: [String]?
    /// While the device's data is re-filtered for a new mask: that mask, and the (seq, id) reached so far.
    var rescopeMask: Int64?
    var rescopeSeq: Int64?
    var rescopeID: String?

    /// The compact names tokens carry on the wire; tokens already handed out decode with them.
    enum CodingKeys: String, CodingKey {
        case company = "c"
        case account = "a"
        case seq = "s"
        case epoch = "e"
        case mask = "m"
        case types = "t"
        case rescopeMask = "rm"
        case rescopeSeq = "rs"
        case rescopeID = "ri"
    }

    init(company: String, account: String, seq: Int64, epoch: Int64, mask: Int64, types: [String]? = nil) {
        self.company = company
        self.account = account
        self.seq = seq
        self.epoch = epoch
        self.mask = mask
        self.types = types
    }

    /// Whether the token was issued to this membership: the same company and member, at an epoch the membership
    /// reached. A token from an earlier membership of the same account (before a removal or a departure) carries an
    /// older epoch and never works again, even after the account is re-admitted.
    func belongs(to membership: Membership) -> Bool {
        company == membership.companyID && account == membership.accountID && epoch >= membership.joinedEpoch
    }

    /// The token part-way through re-filtering toward `target`.
    func rescoping(to target: Int64, after position: (seq: Int64, id: String)) -> SyncToken {
        var token = self
        token.rescopeMask = target
        token.rescopeSeq = position.seq
        token.rescopeID = position.id
        return token
    }

    /// The re-filtering in progress: its target mask and the position reached.
    var rescope: (target: Int64, seq: Int64, id: String)? {
        guard let rescopeMask, let rescopeSeq, let rescopeID else { return nil }
        return (rescopeMask, rescopeSeq, rescopeID)
    }

    /// `payload.mac`, both base64url.
    func encoded(key: SymmetricKey) -> String {
        let payload = (try? JSONEncoder().encode(self)) ?? Data()
        let mac = Data(HMAC<SHA256>.authenticationCode(for: payload, using: key))
        return Secrets.base64URL(payload) + "." + Secrets.base64URL(mac)
    }

    /// The token, when it was made with `key`; nil when altered or not a token.
    static func decode(_ text: String, key: SymmetricKey) -> SyncToken? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let payload = Data(base64URL: String(parts[0])),
            let mac = Data(base64URL: String(parts[1])),
            HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: payload, using: key)
        else { return nil }
        return try? JSONDecoder().decode(SyncToken.self, from: payload)
    }
}
