/// How far a sync has come, for a progress view: reported after each batch of changes pushed and each page pulled.
///
/// The server does not say how many records a pull brings before its last page, so `total` is nil until then; a
/// first sync of a large company shows `records` and `pages` growing, then `total`.
public struct SyncProgress: Sendable, Equatable {
    /// The changes saved here that the server has confirmed so far.
    public var pushed = 0
    /// The records the server has sent so far (changed, deleted, or no longer visible to this member).
    public var records = 0
    /// The pages pulled so far.
    public var pages = 0
    /// How many records the sync brought in all, once the server sent its last page; nil before.
    public var total: Int?

    /// Whether the server sent its last page: the store holds everything the server had when it was asked for.
    public var isComplete: Bool { total != nil }

    /// A sync that has done nothing yet.
    public init() {}
}

/// What a completed sync did.
public struct SyncSummary: Sendable, Equatable {
    /// The changes saved here that the server confirmed.
    public let pushed: Int
    /// The records the server sent (changed, deleted, or no longer visible to this member).
    public let records: Int
    /// The pages pulled.
    public let pages: Int
}
