/// The rule for a name a user gives one of their things (a factor, a passkey): a bounded number of characters, at
/// most `maximumBytes` of UTF-8, and no control characters.
///
/// Characters alone bound nothing: one character may carry any number of combining marks, and 128 of them reached
/// 600 KB, then answered in every `/user`, every refresh and the admin list. 512 bytes is 128 characters of four
/// bytes each, so no name of plain characters in any script meets the byte limit before the character limit.
enum FriendlyName {
    static let maximumBytes = 512

    /// Whether `name` holds at most `maximumCharacters` characters and `maximumBytes` bytes, without control
    /// characters. The bytes are counted first, so a long name is refused without walking its characters.
    static func isAcceptable(_ name: String, maximumCharacters: Int) -> Bool {
        name.utf8.count <= maximumBytes && name.count <= maximumCharacters
            && !name.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }
}
