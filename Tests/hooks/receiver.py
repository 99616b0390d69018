"""An auth hook endpoint for Tests/GatehouseServerTests/AuthHookTests.swift.

Usage: receiver.py CONFIG LOG. Binds a loopback port, prints "READY <port>", and stops when standard input closes.
Every POST is checked with the PyPI `standardwebhooks` package against the secret CONFIG gives its path (CONFIG is
read again for each request, so a test changes answers at any time); a request that does not verify is answered
401. Each request is appended to LOG as one JSON line: path, verified, headers, body. CONFIG:

    {"paths": {"/path": {"secret": "whsec_...", "answer": ANSWER}}}

ANSWER: {"status": 200, "json": {...}} | {"status": 200, "content_type": "text/html", "text": "..."} |
{"status": 200, "big": BYTES} (a JSON answer of that size) | {"status": 204} | {"hang": true} (no answer for 30 s) |
{"claims": {"add": {...}, "drop": [...]}} (the input's claims, changed).
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook

CONFIG, LOG = sys.argv[1], sys.argv[2]
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    # Headers and body leave in separate writes: without this the second waits for the client's delayed ACK.
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        with open(CONFIG) as f:
            route = json.load(f)["paths"].get(self.path, {})
        headers = {k.lower(): v for k, v in self.headers.items()}
        verified = False
        try:
            Webhook(route.get("secret", "")).verify(body, headers)
            verified = True
        except Exception:
            verified = False
        try:
            parsed = json.loads(body)
        except Exception:
            parsed = None
        with lock, open(LOG, "a") as f:
            f.write(json.dumps({"path": self.path, "verified": verified, "headers": headers, "body": parsed}) + "\n")
        if not verified:
            return self.answer(401, "application/json", b'{"message": "bad signature"}')
        answer = route.get("answer", {"status": 204})
        if answer.get("hang"):
            time.sleep(30)
            return
        if "claims" in answer:
            claims = dict(parsed["claims"])
            claims.update(answer["claims"].get("add", {}))
            for name in answer["claims"].get("drop", []):
                claims.pop(name, None)
            return self.answer(200, "application/json", json.dumps({"claims": claims}).encode())
        status = answer.get("status", 200)
        if "big" in answer:
            return self.answer(status, "application/json", b'{"pad": "' + b"x" * answer["big"] + b'"}')
        if "text" in answer:
            return self.answer(status, answer.get("content_type", "text/plain"), answer["text"].encode())
        if "json" in answer:
            return self.answer(status, "application/json", json.dumps(answer["json"]).encode())
        self.answer(status, None, b"")

    def answer(self, status, content_type, data):
        self.send_response(status)
        if content_type:
            self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
threading.Thread(target=server.serve_forever, daemon=True).start()
print(f"READY {server.server_address[1]}", flush=True)
sys.stdin.read()
server.shutdown()
