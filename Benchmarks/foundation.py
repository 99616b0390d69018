#!/usr/bin/env python3
"""Foundation figures for docs/benchmarks.md: start-to-ready time and idle RSS of `gatehouse serve` on SQLite,
and throughput and p99 latency of the no-op route `GET /` under wrk on loopback.

Usage: swift build -c release --product gatehouse && python3 Benchmarks/foundation.py [--binary PATH]
Needs wrk (Debian package `wrk`). Every server it starts listens on 127.0.0.1 only and is stopped at the end.
"""
import argparse
import os
import re
import shutil
import signal
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


def ready(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/ready", timeout=1) as r:
            return r.status == 200
    except Exception:
        return False


def start(binary, data_dir, port):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEHOUSE_")}
    began = time.perf_counter()
    proc = subprocess.Popen(
        [binary, "serve", "--port", str(port), "--data-dir", data_dir, "--log-level", "warning"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = began + 20
    while time.perf_counter() < deadline:
        if ready(port):
            return proc, time.perf_counter() - began
        time.sleep(0.002)
    proc.kill()
    raise SystemExit("gatehouse did not become ready within 20 s")


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=20)


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def wrk(url, connections, seconds, threads=1):
    out = subprocess.run(
        ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds}s", "--latency", url],
        check=True, capture_output=True, text=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    scale = {"us": 0.001, "ms": 1, "s": 1000}[p99.group(2)]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rps, float(p99.group(1)) * scale, int(errors.group(1)) if errors else 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=".build/release/gatehouse")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is missing: apt-get install wrk")

    cold, warm = [], []
    for _ in range(args.runs):
        data = tempfile.mkdtemp(prefix="gatehouse-bench-")
        port = free_port()
        proc, seconds = start(args.binary, data, port)  # fresh data dir: creates the file and migrates
        cold.append(seconds)
        stop(proc)
        proc, seconds = start(args.binary, data, port)  # existing store: nothing to migrate
        warm.append(seconds)
        stop(proc)
        shutil.rmtree(data)

    data = tempfile.mkdtemp(prefix="gatehouse-bench-")
    port = free_port()
    proc, _ = start(args.binary, data, port)
    for _ in range(100):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/").read()
    time.sleep(1)  # let the process settle before reading its idle footprint
    idle = rss_mib(proc.pid)
    url = f"http://127.0.0.1:{port}/"
    wrk(url, 64, 3)  # warm-up
    max_rps, max_p99, max_errors = wrk(url, 64, args.seconds)
    half_rps, half_p99 = None, None
    # p99 at about half of max load: wrk has no rate limit, so halve the load with fewer connections.
    for connections in (8, 4, 2, 1):
        rps, p99, _ = wrk(url, connections, args.seconds)
        if rps <= max_rps * 0.6:
            half_rps, half_p99 = rps, p99
            break
        half_rps, half_p99 = rps, p99
    loaded = rss_mib(proc.pid)
    stop(proc)
    shutil.rmtree(data)

    print(f"cores: {os.cpu_count()}, runs: {args.runs}, wrk: {args.seconds}s")
    print(f"start to ready, fresh store (create + migrate): median {statistics.median(cold)*1000:.0f} ms, "
          f"max {max(cold)*1000:.0f} ms")
    print(f"start to ready, existing store: median {statistics.median(warm)*1000:.0f} ms, "
          f"max {max(warm)*1000:.0f} ms")
    print(f"idle RSS: {idle:.1f} MiB; RSS after load: {loaded:.1f} MiB")
    print(f"no-op GET / at 64 connections: {max_rps:,.0f} req/s, p99 {max_p99:.2f} ms, non-2xx {max_errors}")
    print(f"no-op GET / at ~half load: {half_rps:,.0f} req/s, p99 {half_p99:.2f} ms")


if __name__ == "__main__":
    main()
