#!/usr/bin/env python3
"""Seeds a Gatehouse SQLite store for the sweeper's benchmark (Benchmarks/sweep.sh), and measures its size.

  sweep.py seed DB DEVICES ROTATIONS BENCH_SESSIONS   writes DEVICES accounts, each with a live session that was
      refreshed every 15 minutes ROTATIONS times up to now (a rotated refresh token and a token_refreshed audit event
      per rotation, as the rotation trigger writes them, and one current token); ROTATIONS 0 writes the live rows
      only. Then BENCH_SESSIONS sessions whose refresh tokens are known (printed, one a line), for wrk.
  sweep.py size DB   prints one line: the file's pages, the pages in use, and rows and bytes of the tables that grow.

Writing the rows straight into the store is equivalent, for the sweeper, to making the rotations over HTTP: the rows
are those the rotation trigger writes (migration 6), with the times a device refreshing every 15 minutes leaves, and
the sweeper reads nothing else. It takes seconds instead of hours of simulated time.
"""
import hashlib
import secrets
import sqlite3
import sys
import time

QUARTER = 15 * 60 * 1000
DAY = 86_400_000


def seed(path, devices, rotations, bench_sessions):
    now = int(time.time() * 1000)
    start = now - rotations * QUARTER - 60_000
    db = sqlite3.connect(path, timeout=60)
    numbers = (f"WITH RECURSIVE d(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM d WHERE i < {devices}) ")
    pairs = (f"WITH RECURSIVE d(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM d WHERE i < {devices}), "
             f"k(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM k WHERE j < {rotations} - 1) ")
    with db:
        db.execute(numbers + f"""INSERT INTO accounts (id, email, email_confirmed_at, user_metadata, created_at,
            updated_at) SELECT 'sweep-a-' || i, 'sweep' || i || '@example.com', {start}, '{{}}', {start}, {start}
            FROM d""")
        db.execute(numbers + f"""INSERT INTO sessions (id, account_id, created_at, refreshed_at, expires_at,
            user_agent, ip, aal, amr) SELECT 'sweep-s-' || i, 'sweep-a-' || i, {start}, {now - 60_000},
            {start + 90 * DAY}, 'sweep-bench', '10.0.0.1', 'aal1', '[]' FROM d""")
        if rotations > 0:
            # Rotation j of device i happened at start + (j + 1) quarters; its token was made a quarter earlier.
            db.execute(pairs + f"""INSERT INTO refresh_tokens (token_hash, session_id, created_at, rotated_at)
                SELECT 'sweep-t-' || i || '-' || j, 'sweep-s-' || i, {start} + j * {QUARTER},
                {start} + (j + 1) * {QUARTER} FROM d, k""")
            db.execute(pairs + f"""INSERT INTO audit_events (occurred_at, action, account_id, ip, user_agent, detail)
                SELECT {start} + (j + 1) * {QUARTER}, 'token_refreshed', 'sweep-a-' || i, '10.0.0.1',
                'sweep-bench', '{{"session":"sweep-s-' || i || '"}}' FROM d, k""")
        db.execute(numbers + f"""INSERT INTO refresh_tokens (token_hash, session_id, created_at)
            SELECT 'sweep-t-' || i || '-current', 'sweep-s-' || i, {now - 60_000} FROM d""")
    db.execute("ANALYZE")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    tokens(path, bench_sessions)


def tokens(path, count):
    """Writes `count` sessions whose refresh tokens are known, and prints the tokens: wrk rotates them and keeps
    the successors only in memory, so each wrk run needs sessions of its own. Digests are SHA-256 hex, as stored."""
    now = int(time.time() * 1000)
    db = sqlite3.connect(path, timeout=60)
    made = []
    with db:
        for n in range(count):
            token = f"sweep-bench-{n}-{now}-{secrets.token_hex(8)}"
            made.append(token)
            db.execute("""INSERT INTO accounts (id, email, email_confirmed_at, user_metadata, created_at, updated_at)
                VALUES (?, ?, ?, '{}', ?, ?)""", (f"bench-a-{token}", f"bench-{n}-{now}@example.com", now, now, now))
            db.execute("""INSERT INTO sessions (id, account_id, created_at, refreshed_at, expires_at, user_agent, ip,
                aal, amr) VALUES (?, ?, ?, ?, ?, 'wrk', '127.0.0.1', 'aal1', '[]')""",
                       (f"bench-s-{token}", f"bench-a-{token}", now, now, now + 90 * DAY))
            db.execute("INSERT INTO refresh_tokens (token_hash, session_id, created_at) VALUES (?, ?, ?)",
                       (hashlib.sha256(token.encode()).hexdigest(), f"bench-s-{token}", now))
    db.close()
    print("\n".join(made))


def size(path):
    db = sqlite3.connect(path, timeout=60)
    page = db.execute("PRAGMA page_size").fetchone()[0]
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    free = db.execute("PRAGMA freelist_count").fetchone()[0]
    parts = [f"pages={pages} in_use={pages - free} page_size={page} bytes_in_use={(pages - free) * page}"]
    for table in ["refresh_tokens", "sessions", "audit_events"]:
        rows = db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        # The table and its indexes, in pages (SQLite's dbstat).
        used = db.execute(
            "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name = ? OR name IN "
            "(SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?)", (table, table)).fetchone()[0]
        parts.append(f"{table}={rows}/{used}")
    db.close()
    print(" ".join(parts))


if __name__ == "__main__":
    if sys.argv[1] == "seed":
        seed(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif sys.argv[1] == "tokens":
        tokens(sys.argv[2], int(sys.argv[3]))
    else:
        size(sys.argv[2])
