#!/usr/bin/env python3
"""Does an answer's time tell whether an address has an account? (attack review, finding 8)

Starts `gatehouse serve` on a fresh data folder with the outbox (no SMTP), signs up N addresses (known), then asks
for recovery mail for each known address and for N unknown ones, interleaved, each from its own client address
behind the trusted loopback proxy so no limit interferes. Prints the median and p90 latency of both groups and their
ratio. Mail is queued in the store and sent by a worker, so both answers do the same work on the request path.

Usage: python3 Benchmarks/enumeration.py --binary .build/debug/gatehouse [--count 200]
"""
import argparse
import json
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(base, path, body, ip):
    request = urllib.request.Request(
        base + path, data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "X-Forwarded-For": ip})
    start = time.perf_counter()
    with urllib.request.urlopen(request) as response:
        response.read()
        status = response.status
    return status, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--count", type=int, default=200)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="gatehouse-enum-")
    port = free_port()
    server = subprocess.Popen(
        [args.binary, "serve", "--port", str(port), "--data-dir", folder + "/data", "--log-level", "error",
         "--trusted-proxies", "127.0.0.1"])
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                urllib.request.urlopen(base + "/health/ready").read()
                break
            except Exception:
                time.sleep(0.05)
        known = [f"known-{i}@example.com" for i in range(args.count)]
        for i, email in enumerate(known):
            post(base, "/auth/v1/signup", {"email": email, "password": "a long passphrase 1"}, f"10.1.{i // 250}.{i % 250}")
        times = {"known": [], "unknown": []}
        for i in range(args.count):
            for group, email in (("known", known[i]), ("unknown", f"unknown-{i}@example.com")):
                status, elapsed = post(base, "/auth/v1/recover", {"email": email}, f"10.2.{i // 250}.{i % 250}" if group == "known" else f"10.3.{i // 250}.{i % 250}")
                assert status == 200, status
                times[group].append(elapsed * 1000)
        for group, values in times.items():
            values.sort()
            print(f"{group:8s} median {statistics.median(values):.3f} ms  p90 {values[int(len(values) * 0.9)]:.3f} ms  (n={len(values)})")
        ratio = statistics.median(times["known"]) / statistics.median(times["unknown"])
        print(f"median known / unknown = {ratio:.2f}")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
