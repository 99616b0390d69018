import Foundation
import Logging
import SQLKit

/// A consistent copy of an SQLite store, taken while a server runs and writes (`gatehouse backup`).
///
/// SQLite's `VACUUM INTO` reads the store in one read transaction, so the copy holds every transaction committed
/// before it began and none of the later ones; in WAL mode the server's writers do not wait for it. The copy is a
/// single file in rollback-journal mode, with no `-wal` beside it: restoring is putting it in place of the store.
/// It is written 0600 under a temporary name in the target's folder and renamed when complete, so a half-written
/// copy never sits under the name asked for. PostgreSQL has its own tools (`pg_dump`), and the command says so.
public enum StoreBackup {
    /// What a finished backup wrote.
    public struct Report: Sendable {
        /// The copy's absolute path.
        public let path: String
        /// The copy's size in bytes.
        public let bytes: Int64
    }

    /// Copies the store at `location` to `path`. An existing file at `path` is replaced only when `replacing`.
    /// Never creates a store: a missing SQLite file is an error, not an empty backup.
    public static func write(
        _ location: StoreLocation, to path: String, replacing: Bool, logger: Logger
    ) async throws -> Report {
        guard case .sqlite(let source) = location else { throw BackupError.postgres }
        let manager = FileManager.default
        let target = URL(fileURLWithPath: path).standardizedFileURL.path
        guard manager.fileExists(atPath: source) else { throw BackupError.noStore(path: source) }
        // Nor any of its side files: renaming over the write-ahead log would lose what it holds.
        let ownFiles = ["", "-wal", "-shm", "-journal"].map { realPath(source) + $0 }
        if ownFiles.contains(realPath(target)) { throw BackupError.sameFile(path: target) }
        if !replacing, manager.fileExists(atPath: target) { throw BackupError.exists(path: target) }
        let folder = (target as NSString).deletingLastPathComponent
        var isFolder: ObjCBool = false
        guard manager.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
            throw BackupError.noFolder(path: folder)
        }

        // VACUUM INTO writes into an existing file only when it is empty, and keeps its mode: made 0600 here, the copy
        // is never readable by others, not even for a moment.
        let partial = (folder as NSString).appendingPathComponent(
            ".\((target as NSString).lastPathComponent).\(UUID().uuidString.prefix(8).lowercased()).partial")
        guard manager.createFile(atPath: partial, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw BackupError.cannotWrite(path: partial)
        }
        do {
            let store = try Store(location: location, connectionsPerLoop: 1, logger: logger)
            do {
                try await store.vacuum(into: partial)
                await store.close()
            } catch {
                await store.close()
                throw error
            }
            try sync(partial)
            try publish(partial, as: target, replacing: replacing)
        } catch {
            try? manager.removeItem(atPath: partial)
            throw error
        }
        try? sync(folder)
        let bytes = (try manager.attributesOfItem(atPath: target)[.size] as? NSNumber)?.int64Value ?? 0
        return Report(path: target, bytes: bytes)
    }

    /// Gives the finished copy its name: `rename` replaces an existing file in one step; without `replacing`, `link`
    /// fails if a file appeared under the name since the check, rather than replacing it.
    private static func publish(_ partial: String, as target: String, replacing: Bool) throws {
        if replacing {
            guard rename(partial, target) == 0 else { throw BackupError.cannotWrite(path: target) }
            return
        }
        guard link(partial, target) == 0 else {
            throw errno == EEXIST ? BackupError.exists(path: target) : BackupError.cannotWrite(path: target)
        }
        unlink(partial)
    }

    /// Flushes a file (or a folder's entries) to disk, so a backup reported done survives a power cut.
    private static func sync(_ path: String) throws {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { throw BackupError.cannotWrite(path: path) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw BackupError.cannotWrite(path: path) }
    }

    private static func realPath(_ path: String) -> String {
        URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    }
}

extension Store {
    /// Writes a transactionally consistent copy of this SQLite store into `path`, an empty or missing file.
    func vacuum(into path: String) async throws {
        try await withConnection { db in try await db.raw("VACUUM INTO \(bind: path)").run() }
    }
}

/// Why `gatehouse backup` made no copy.
public enum BackupError: Error, CustomStringConvertible {
    case postgres
    case noStore(path: String)
    case sameFile(path: String)
    case exists(path: String)
    case noFolder(path: String)
    case cannotWrite(path: String)

    public var description: String {
        switch self {
        case .postgres:
            "the store is PostgreSQL: back it up with pg_dump (pg_dump -Fc), restore with pg_restore; "
                + "see Backup and restore in docs/operators.md"
        case .noStore(let path): "no SQLite store at \(path)"
        case .sameFile(let path): "\(path) is the store itself (or one of its files); name another file"
        case .exists(let path): "\(path) exists; pass --force to replace it"
        case .noFolder(let path): "the folder \(path) does not exist"
        case .cannotWrite(let path): "cannot write \(path)"
        }
    }
}
