#!/usr/bin/env python3
"""Writes N accounts, each with one live session and one unrotated refresh token, straight into a Gatehouse store,
so that the scale benchmark measures requests against indexes as large as a big deployment's.

Usage: seed.py N   with BENCH_SEED_SQLITE=path/to/gatehouse.sqlite, or GATEHOUSE_BENCH_DATABASE_URL=postgres://…
(psql then runs the statements). The rows are generated inside the database (a recursive CTE on SQLite,
generate_series on PostgreSQL), in one transaction, and the store's statistics are refreshed afterwards.
"""
import os
import sqlite3
import subprocess
import sys
import time

count = int(sys.argv[1])
now = int(time.time() * 1000)
day = 86_400_000
# Ids and digests are distinct from anything Gatehouse makes (seed- prefixes, not hex), so no benchmark account or
# token can collide with them. Sessions end in a day and were refreshed now: live rows, as a deployment holds.
statements = [
    f"""INSERT INTO accounts (id, email, email_confirmed_at, user_metadata, created_at, updated_at)
        SELECT 'seed-a-' || i, 'seed' || i || '@example.com', {now}, '{{}}', {now}, {now} FROM numbers""",
    f"""INSERT INTO sessions (id, account_id, created_at, refreshed_at, expires_at, user_agent, ip, aal, amr)
        SELECT 'seed-s-' || i, 'seed-a-' || i, {now}, {now}, {now + day}, 'seed', '127.0.0.1', 'aal1', '[]'
        FROM numbers""",
    f"""INSERT INTO refresh_tokens (token_hash, session_id, created_at)
        SELECT 'seed-t-' || i, 'seed-s-' || i, {now} FROM numbers""",
]
started = time.monotonic()
if url := os.environ.get("GATEHOUSE_BENCH_DATABASE_URL"):
    numbers = f"(SELECT generate_series(1, {count}) AS i) numbers"
    script = "BEGIN;\n" + "".join(s.replace("FROM numbers", "FROM " + numbers) + ";\n" for s in statements)
    script += "COMMIT;\nANALYZE;\n"
    subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", url], input=script, text=True, check=True,
                   stdout=subprocess.DEVNULL)
else:
    db = sqlite3.connect(os.environ["BENCH_SEED_SQLITE"], timeout=60)
    cte = f"WITH RECURSIVE numbers(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM numbers WHERE i < {count}) "
    with db:
        for statement in statements:
            db.execute(cte + statement)
    db.execute("ANALYZE")
    db.close()
print(f"seeded {count:,} accounts, sessions and refresh tokens in {time.monotonic() - started:.1f} s")
