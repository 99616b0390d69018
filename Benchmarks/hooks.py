"""Auth hook latency for Benchmarks/hooks.sh.

    python3 Benchmarks/hooks.py receiver
        a hook receiver on a loopback port that answers at once (prints "READY <port>"): /claims gives the claims back
        unchanged, /password and /mfa say continue, /before and /email answer {}. It checks no signature: the figure
        is the server's cost of a hook, not the receiver's.
    python3 Benchmarks/hooks.py run --gatehouse URL --key SERVICE_KEY --label L [--requests N]
        times N password sign-ins and N sign-ups, one at a time after 5 unmeasured, and prints a Markdown row of the
        median and 95th percentile of each, in milliseconds.
"""

import argparse
import http.client
import http.server
import json
import random
import statistics
import sys
import time
import urllib.parse
import uuid

PASSWORD = "bench password 1"


class Hooks(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The headers and the body go out in two writes: with Nagle's algorithm on, the second waits for the client's
    # delayed ACK (40 ms on Linux), which would be measured as the hook's cost.
    disable_nagle_algorithm = True

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
        if self.path == "/claims":
            answer = {"claims": body.get("claims", {})}
        elif self.path in ("/password", "/mfa"):
            answer = {"decision": "continue"}
        else:
            answer = {}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def receiver():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hooks)
    print(f"READY {server.server_address[1]}", flush=True)
    server.serve_forever()


class Client:
    def __init__(self, base):
        self.connection = http.client.HTTPConnection(urllib.parse.urlsplit(base).netloc, timeout=60)

    def call(self, method, path, body=None, key=None):
        # A new client address each call: per-address limits stay out of the figure.
        headers = {"Content-Type": "application/json", "X-Forwarded-For": f"10.{random.randint(0, 255)}."
                   f"{random.randint(0, 255)}.{random.randint(1, 254)}"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
            headers["apikey"] = key
        started = time.perf_counter()
        self.connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        response = self.connection.getresponse()
        data = response.read()
        elapsed = (time.perf_counter() - started) * 1000
        if response.status >= 300:
            sys.exit(f"{method} {path}: {response.status} {data[:300]!r}")
        return elapsed, data


def timed(samples, warmup, call):
    for _ in range(warmup):
        call()
    return [call() for _ in range(samples)]


def summary(times):
    times = sorted(times)
    return f"{statistics.median(times):.2f} | {times[int(len(times) * 0.95) - 1]:.2f}"


def run(args):
    client = Client(args.gatehouse)
    email = f"bench-{uuid.uuid4().hex[:10]}@example.com"
    client.call("POST", "/auth/v1/admin/users", {"email": email, "password": PASSWORD, "email_confirm": True},
                key=args.key)
    sign_in = timed(args.requests, 5, lambda: client.call(
        "POST", "/auth/v1/token?grant_type=password", {"email": email, "password": PASSWORD})[0])
    sign_up = timed(args.requests, 5, lambda: client.call(
        "POST", "/auth/v1/signup", {"email": f"bench-{uuid.uuid4().hex[:12]}@example.com",
                                    "password": PASSWORD})[0])
    print(f"| {args.label} | {summary(sign_in)} | {summary(sign_up)} |", flush=True)


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("receiver")
    go = sub.add_parser("run")
    go.add_argument("--gatehouse", required=True)
    go.add_argument("--key", required=True)
    go.add_argument("--label", required=True)
    go.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    receiver() if args.command == "receiver" else run(args)


if __name__ == "__main__":
    main()
