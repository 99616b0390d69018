#!/usr/bin/env python3
"""Backup figures for docs/benchmarks.md: how long `gatehouse backup` takes on a SQLite store of N synced records of
about 1 KB, with the server idle and while 4 clients push, and what those pushes see while the copy is taken.

Usage: swift build -c release --product gatehouse --build-path .build-release
       python3 Benchmarks/backup.py [--binary .build-release/release/gatehouse] [--records 200000]
The store is filled through the push API (batches of 100), as devices fill it. Every server it starts listens on
127.0.0.1 only and is stopped at the end; the store lives in a temporary folder that is removed.
"""
import argparse
import glob
import json
import os
import quopri
import re
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request
import uuid


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base, path, body, bearer=None, method="POST"):
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method=method)
    request.add_header("Content-Type", "application/json")
    if bearer:
        request.add_header("Authorization", "Bearer " + bearer)
    with urllib.request.urlopen(request, timeout=60) as reply:
        return json.loads(reply.read() or b"{}")


def company_session(base, data_dir):
    """Signs up (the code from the outbox), makes a company with a credential, and logs in to it."""
    email = f"bench-{uuid.uuid4().hex[:8]}@example.com"
    call(base, "/auth/v1/signup", {"email": email, "password": "bench password 1"})
    deadline = time.monotonic() + 20  # the mail worker writes the outbox a moment later
    while not (mails := glob.glob(os.path.join(data_dir, "outbox", "*.eml"))) and time.monotonic() < deadline:
        time.sleep(0.05)
    mail = max(mails, key=os.path.getmtime)
    text = quopri.decodestring(open(mail, "rb").read()).decode()
    code = re.search(r"^(\d{6})\r?$", text, re.M).group(1)
    access = call(base, "/auth/v1/verify", {"type": "signup", "email": email, "token": code})["access_token"]
    cid = call(base, "/v1/companies", {"name": "Bench Co"}, access)["id"]
    call(base, f"/v1/companies/{cid}/credential", {"username": "bench", "password": "company password 1"}, access,
         method="PUT")
    token = call(base, f"/v1/companies/{cid}/login", {"username": "bench", "password": "company password 1"},
                 access)["access_token"]
    return cid, token


def push(base, cid, token, client, count):
    mutations = [{"mid": uuid.uuid4().hex, "id": str(uuid.uuid4()), "type": "item", "op": "upsert", "base": 0,
                  "fields": {"name": "item", "note": "x" * 1000}} for _ in range(count)]
    results = call(base, f"/v1/companies/{cid}/sync/push", {"client_id": client, "mutations": mutations},
                   token)["results"]
    assert all(r["status"] == "applied" for r in results), results[:1]


def backup(binary, data_dir, target):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEHOUSE_")}
    began = time.perf_counter()
    out = subprocess.run([binary, "backup", "--to", target, "--data-dir", data_dir, "--log-level", "warning"],
                         env=env, check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - began, out.strip()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=".build-release/release/gatehouse")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    binary = os.path.realpath(args.binary)
    work = tempfile.mkdtemp(prefix="gatehouse-backup-")
    data_dir = os.path.join(work, "data")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEHOUSE_")}
    server = subprocess.Popen([binary, "serve", "--port", str(port), "--data-dir", data_dir, "--log-level",
                               "warning"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(base + "/health/ready", timeout=1)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise SystemExit("gatehouse did not become ready within 20 s")
                time.sleep(0.05)
        cid, token = company_session(base, data_dir)

        began = time.perf_counter()
        batches = args.records // 100
        lock = threading.Lock()
        left = [batches]

        def seed():
            client = uuid.uuid4().hex
            while True:
                with lock:
                    if left[0] == 0:
                        return
                    left[0] -= 1
                push(base, cid, token, client, 100)

        seeders = [threading.Thread(target=seed) for _ in range(4)]
        for thread in seeders:
            thread.start()
        for thread in seeders:
            thread.join()
        store = os.path.join(data_dir, "gatehouse.sqlite")
        size = os.path.getsize(store) + (os.path.getsize(store + "-wal") if os.path.exists(store + "-wal") else 0)
        print(f"seeded {batches * 100:,} records in {time.perf_counter() - began:.1f} s; "
              f"store {size / 2**20:.1f} MiB (file and WAL)")

        idle = []
        for run in range(args.runs):
            seconds, line = backup(binary, data_dir, os.path.join(work, f"idle-{run}.sqlite"))
            idle.append(seconds)
            print(f"idle backup {run + 1}: {seconds:.2f} s  ({line})")

        # Four clients push batches of 10 records; each push's latency is kept with its start time.
        stopping = threading.Event()
        latencies = []

        def load():
            client = uuid.uuid4().hex
            while not stopping.is_set():
                start = time.perf_counter()
                push(base, cid, token, client, 10)
                with lock:
                    latencies.append((start, time.perf_counter() - start))

        pushers = [threading.Thread(target=load) for _ in range(4)]
        for thread in pushers:
            thread.start()
        time.sleep(5)
        loaded = []
        windows = []
        for run in range(args.runs):
            start = time.perf_counter()
            seconds, line = backup(binary, data_dir, os.path.join(work, f"loaded-{run}.sqlite"))
            loaded.append(seconds)
            windows.append((start, start + seconds))
            print(f"backup under push load {run + 1}: {seconds:.2f} s  ({line})")
            time.sleep(3)
        stopping.set()
        for thread in pushers:
            thread.join()

        def summary(samples):
            samples = sorted(samples)
            if not samples:
                return "none"
            p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
            rate = len(samples)
            return (f"{rate} pushes, p50 {statistics.median(samples) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
                    f"max {samples[-1] * 1000:.1f} ms")

        during = [d for s, d in latencies if any(a <= s <= b for a, b in windows)]
        outside = [d for s, d in latencies if not any(a - 1 <= s <= b + 1 for a, b in windows)]
        print(f"idle backup median {statistics.median(idle):.2f} s; under load median {statistics.median(loaded):.2f} s")
        print(f"pushes of 10 records while a backup ran: {summary(during)}")
        print(f"pushes of 10 records otherwise:          {summary(outside)}")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
