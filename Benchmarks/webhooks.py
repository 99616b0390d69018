"""Webhook delivery throughput for Benchmarks/webhooks.sh: events delivered per second to a local receiver.

    python3 Benchmarks/webhooks.py receive
        a minimal receiver (no sleep, no work beyond the signature check): prints "READY <port>", answers every POST
        204 after verifying it with the `standardwebhooks` package against the secret given by POST /secret, counts
        the distinct webhook-ids per path, and answers GET /stats with {"received", "distinct", "unverified",
        "first", "last"} (times of the first and last delivery, time.time()). Exits when its standard input closes.
    python3 Benchmarks/webhooks.py run --gatehouse URL --key SERVICE_KEY --receiver URL --label L
            [--events N] [--clients C] [--endpoints E]
        registers E endpoints on the receiver for user.created, creates N users through the admin API with C clients
        at once (confirmed, no password: nothing to hash), and waits until the receiver has N x E distinct deliveries.
        Prints a Markdown table row: N, E, the time to create the users, the time from the first creation to the last
        delivery, deliveries per second over that span, the delivery lag after the last creation, the deliveries still
        to come when the last creation was answered, and the rate at which that backlog drained (the dispatcher alone,
        with no request load beside it).

Times are wall-clock on one machine: client, server and receiver share its cores.
"""

import argparse
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse
import uuid
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.secrets = {}
        self.ids = {}
        self.received = 0
        self.unverified = 0
        self.first = None
        self.last = None


class Receiver(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def reply(self, status, payload=None):
        data = json.dumps(payload).encode() if payload is not None else b""
        self.send_response(status)
        if data:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        stats = self.server.stats
        with stats.lock:
            self.reply(
                200,
                {
                    "received": stats.received,
                    "distinct": sum(len(ids) for ids in stats.ids.values()),
                    "unverified": stats.unverified,
                    "first": stats.first,
                    "last": stats.last,
                },
            )

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        stats = self.server.stats
        if self.path == "/secret":
            given = json.loads(body)
            with stats.lock:
                stats.secrets[given["path"]] = Webhook(given["secret"])
            self.reply(204)
            return
        with stats.lock:
            webhook = stats.secrets.get(self.path)
        try:
            webhook.verify(body, {name.lower(): value for name, value in self.headers.items()})
            verified = True
        except Exception:  # noqa: BLE001 - counted, and the receiver answers 401 as a real one would
            verified = False
        now = time.time()
        with stats.lock:
            stats.received += 1
            if verified:
                stats.ids.setdefault(self.path, set()).add(self.headers.get("webhook-id"))
            else:
                stats.unverified += 1
            stats.first = stats.first or now
            stats.last = now
        self.reply(204 if verified else 401)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


def receive(_args):
    server = Server(("127.0.0.1", 0), Receiver)
    server.stats = Stats()

    def exit_when_stdin_closes():
        sys.stdin.read()
        os._exit(0)

    threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
    print(f"READY {server.server_address[1]}", flush=True)
    server.serve_forever()


class Client:
    """One kept connection; JSON in and out."""

    def __init__(self, base):
        self.netloc = urllib.parse.urlsplit(base).netloc
        self.connection = http.client.HTTPConnection(self.netloc, timeout=120)

    def call(self, method, path, body=None, key=None):
        headers = {}
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = "application/json"
        if key:
            headers["Authorization"] = f"Bearer {key}"
            headers["apikey"] = key
        self.connection.request(method, path, body=data, headers=headers)
        response = self.connection.getresponse()
        raw = response.read()
        try:
            return response.status, json.loads(raw) if raw else None
        except ValueError:
            return response.status, raw


def run(args):
    gatehouse = Client(args.gatehouse)
    receiver = Client(args.receiver)
    for index in range(args.endpoints):
        path = f"/hook{index}"
        status, endpoint = gatehouse.call(
            "POST", "/auth/v1/admin/webhooks", {"url": args.receiver + path, "events": ["user.created"]}, key=args.key
        )
        if status != 201:
            raise SystemExit(f"registering the endpoint failed: {status} {endpoint}")
        receiver.call("POST", "/secret", {"path": path, "secret": endpoint["secret"]})

    local = threading.local()

    def create(_):
        if not hasattr(local, "client"):
            local.client = Client(args.gatehouse)
        email = f"hooked-{uuid.uuid4().hex[:12]}@example.com"
        status, user = local.client.call(
            "POST", "/auth/v1/admin/users", {"email": email, "email_confirm": True}, key=args.key
        )
        if status != 200:
            raise SystemExit(f"creating a user failed: {status} {user}")

    expected = args.events * args.endpoints
    start = time.time()
    with ThreadPoolExecutor(max_workers=args.clients) as pool:
        list(pool.map(create, range(args.events)))
    created = time.time()
    _, at_creation = receiver.call("GET", "/stats")
    deadline = created + args.timeout
    while True:
        _, stats = receiver.call("GET", "/stats")
        if stats["distinct"] >= expected or time.time() > deadline:
            break
        time.sleep(0.01)
    if stats["unverified"]:
        print(f"warning: {stats['unverified']} deliveries did not verify", file=sys.stderr)
    if stats["distinct"] < expected:
        raise SystemExit(f"only {stats['distinct']} of {expected} deliveries arrived within {args.timeout} s")
    last = stats["last"]
    span = last - start
    backlog = expected - at_creation["distinct"]
    lag = max(0.0, last - created)
    drain = f"{backlog / lag:.0f}" if backlog > 0 and lag > 0 else "-"
    print(
        f"| {args.label} | {args.events} | {args.endpoints} | {created - start:.2f} | {span:.2f} | "
        f"{expected / span:.0f} | {lag:.2f} | {backlog} | {drain} |",
        flush=True,
    )


def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("receive")
    runner = commands.add_parser("run")
    runner.add_argument("--gatehouse", required=True)
    runner.add_argument("--key", required=True)
    runner.add_argument("--receiver", required=True)
    runner.add_argument("--label", required=True)
    runner.add_argument("--events", type=int, default=2000)
    runner.add_argument("--clients", type=int, default=8)
    runner.add_argument("--endpoints", type=int, default=1)
    runner.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    {"receive": receive, "run": run}[args.command](args)


if __name__ == "__main__":
    main()
