"""A webhook receiver for the outbound webhook tests: checks every delivery's Standard Webhooks signature with the
PyPI `standardwebhooks` package (the library an integrator would use) and answers as the test tells it to.

Usage: receiver.py CONFIG.json LOG.jsonl

Listens on 127.0.0.1 on a port the system picks, prints "READY <port>", and exits when its standard input closes, so
a test runner that dies takes it along. CONFIG.json is read again for every request, so a test changes how a path
answers by rewriting the file:

    {"paths": {"/ok": {"behaviour": "ok", "secrets": ["whsec_..."]},
               "/broken": {"behaviour": "status:500", "secrets": ["whsec_..."]}}}

Behaviours:
    ok                  204, no body
    status:N            N with a short text body (500, 410, ...)
    redirect:URL        302 with Location: URL
    slow:SECONDS        waits SECONDS, then 200 with a short body
    huge                200 with a 10 MiB body, its Content-Length declared, streamed in 64 KiB pieces
    huge:chunked        the same 10 MiB with chunked transfer encoding (no length up front)
    hang                never answers: waits until the client gives up and closes the connection

A request is verified when one of the path's secrets verifies it (`Webhook(secret).verify(body, headers)`); a request
that no secret verifies (or to a path with none) is answered 401 whatever the behaviour, and written to standard error.

Each request appends one JSON line to LOG.jsonl as soon as its body is read, before the answer:
    {"event": "request", "received_at", "path", "webhook_id", "webhook_timestamp", "signatures", "verified",
     "verified_by" (indexes of the secrets that verify), "error", "content_type", "type", "body" (parsed JSON or
     null), "answer" (the status code, or "hang")}
and a "hang" request a second line {"event": "closed", "path", "webhook_id", "closed_at"} once the client has closed
the connection.
"""

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook

HUGE_SIZE = 10 * 1024 * 1024
PIECE = 64 * 1024


def exit_when_stdin_closes():
    sys.stdin.read()
    os._exit(0)


class Log:
    """The JSON-lines log: one whole line per write, under a lock, flushed at once so the test reads it at any time."""

    def __init__(self, path):
        self.lock = threading.Lock()
        self.file = open(path, "a", encoding="utf-8")

    def write(self, entry):
        line = json.dumps(entry, separators=(",", ":")) + "\n"
        with self.lock:
            self.file.write(line)
            self.file.flush()


def read_config(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"paths": {}}


def verify(body, headers, secrets):
    """The indexes of the secrets that verify the request, and the last verification error (None when one did)."""
    verified_by = []
    error = "no secret configured for this path" if not secrets else None
    for index, secret in enumerate(secrets):
        try:
            Webhook(secret).verify(body, headers)
            verified_by.append(index)
        except Exception as failure:  # noqa: BLE001 - any failure is a failed verification, logged as it is
            error = f"{type(failure).__name__}: {failure}"
    return verified_by, (None if verified_by else error)


class Handler(BaseHTTPRequestHandler):
    # Headers and body leave in separate writes: without this the second waits for the client's delayed ACK.
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def handle(self):
        """Requests on this connection until it closes; a client that drops it (a server killed, an answer cut off
        at the client's cap) is no error of the receiver's."""
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError):
            pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        config = read_config(self.server.config_path)
        route = config.get("paths", {}).get(self.path, {})
        behaviour = route.get("behaviour", "status:404")
        headers = {name.lower(): value for name, value in self.headers.items()}
        verified_by, error = verify(body, headers, route.get("secrets", []))
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        verified = bool(verified_by)
        answer = self.planned_answer(behaviour) if verified else 401
        webhook_id = headers.get("webhook-id")
        signature = headers.get("webhook-signature")
        self.server.log.write(
            {
                "event": "request",
                "received_at": time.time(),
                "path": self.path,
                "webhook_id": webhook_id,
                "webhook_timestamp": headers.get("webhook-timestamp"),
                "signatures": len(signature.split(" ")) if signature else 0,
                "verified": verified,
                "verified_by": verified_by,
                "error": error,
                "content_type": headers.get("content-type"),
                "type": parsed.get("type") if isinstance(parsed, dict) else None,
                "body": parsed,
                "answer": answer,
            }
        )
        if not verified:
            print(f"UNVERIFIED delivery to {self.path} ({webhook_id}): {error}", file=sys.stderr, flush=True)
            self.answer(401, b"signature not verified")
            return
        try:
            self.behave(behaviour, webhook_id)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    @staticmethod
    def planned_answer(behaviour):
        kind, _, argument = behaviour.partition(":")
        if kind == "status":
            return int(argument)
        return {"ok": 204, "redirect": 302, "hang": "hang"}.get(kind, 200)

    def answer(self, status, body, extra=()):
        self.send_response(status)
        for name, value in extra:
            self.send_header(name, value)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def behave(self, behaviour, webhook_id):
        kind, _, argument = behaviour.partition(":")
        if kind == "ok":
            self.send_response(204)
            self.end_headers()
        elif kind == "status":
            self.answer(int(argument), f"answered {argument}".encode())
        elif kind == "redirect":
            self.answer(302, b"moved", extra=[("Location", argument)])
        elif kind == "slow":
            time.sleep(float(argument))
            self.answer(200, b"slowly")
        elif kind == "huge":
            self.huge(chunked=argument == "chunked")
        elif kind == "hang":
            self.hang(webhook_id)
        else:
            self.answer(500, f"unknown behaviour {behaviour}".encode())

    def huge(self, chunked):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(HUGE_SIZE))
        self.end_headers()
        piece = b"x" * PIECE
        for _ in range(HUGE_SIZE // PIECE):
            if chunked:
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            else:
                self.wfile.write(piece)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")

    def hang(self, webhook_id):
        """Answers nothing: reads until the client closes the connection (or resets it), then notes when."""
        self.close_connection = True
        try:
            while self.connection.recv(4096):
                pass
        except OSError:
            pass
        self.server.log.write(
            {"event": "closed", "path": self.path, "webhook_id": webhook_id, "closed_at": time.time()}
        )


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def main():
    config_path, log_path = sys.argv[1], sys.argv[2]
    server = Server(("127.0.0.1", 0), Handler)
    server.config_path = config_path
    server.log = Log(log_path)
    threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
    print(f"READY {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
