import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Gives back the pages of code the server ran only while starting.
///
/// Starting touches code all over the binary and its libraries: argument and configuration parsing, migrations, the
/// router's hundreds of routes, the mail templates. The kernel maps code 64 KB around each page a process runs (its
/// fault-around), so after start 18 MiB of the binary's 38 MiB of code stayed resident, most of the idle server's
/// 51.8 MiB, though an idle server runs a small part of it. Once the server listens and its store is migrated, the
/// executable file mappings are advised out (`MADV_PAGEOUT`, Linux 5.4+): the kernel unmaps the pages only this
/// process maps, and what runs next faults back in from the page cache or the file. Nothing is lost: the code is the
/// file's, read again when used. Libraries' pages that other processes map stay as they are.
enum StartupCodePages {
    /// Advises every executable file mapping of this process out; answers how many were advised (0 where the system
    /// has no such advice).
    @discardableResult
    static func release() -> Int {
        #if os(Linux)
            // Read to the end: the file reports no size, and a single read of it stops at a page.
            guard let file = FileHandle(forReadingAtPath: "/proc/self/maps"),
                let data = try? file.readToEnd(), (try? file.close()) != nil
            else { return 0 }
            let maps = String(decoding: data, as: UTF8.self)
            var advised = 0
            for range in executableFileRanges(maps) {
                guard let start = UnsafeMutableRawPointer(bitPattern: range.start) else { continue }
                if madvise(start, Int(range.end - range.start), pageOut) == 0 { advised += 1 }
            }
            return advised
        #else
            return 0
        #endif
    }

    /// `MADV_PAGEOUT` (Linux's uapi value; older C headers lack the name).
    static let pageOut: Int32 = 21

    /// The address ranges of `/proc/self/maps` lines that map a file with execute permission.
    static func executableFileRanges(_ maps: String) -> [(start: UInt, end: UInt)] {
        maps.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6, fields[1].contains("x"), fields[5].hasPrefix("/") else { return nil }
            let bounds = fields[0].split(separator: "-")
            guard bounds.count == 2, let start = UInt(bounds[0], radix: 16), let end = UInt(bounds[1], radix: 16),
                end > start
            else { return nil }
            return (start, end)
        }
    }
}
