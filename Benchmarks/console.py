"""Console page times for Benchmarks/console.sh: an operator at aal2 asks for each console page, one request at a time.

    python3 Benchmarks/console.py operator --gatehouse URL --key SERVICE_KEY
        makes a confirmed account through the admin API, signs it in with its password, enrolls an authenticator app
        (pyotp gives the code) and steps the session up to aal2; prints one JSON line {"email", "access"}. The caller
        then grants the role with `gatehouse operators add EMAIL`.
    python3 Benchmarks/console.py run --gatehouse URL --operator FILE --label L [--requests N]
        asks for each console page N times (after 3 unmeasured) and prints, per page, the median and 95th percentile
        of the time to the whole answer and the answer's size in bytes, as a Markdown table row.

Times are as the client saw them on loopback (http.client, one kept connection): the server's time plus a few tens of
microseconds.
"""

import argparse
import http.client
import json
import statistics
import sys
import time
import urllib.parse
import uuid

import pyotp

PASSWORD = "bench password 1"


class Client:
    def __init__(self, base):
        self.netloc = urllib.parse.urlsplit(base).netloc
        self.connection = http.client.HTTPConnection(self.netloc, timeout=120)

    def call(self, method, path, body=None, bearer=None, key=None, cookie=None):
        headers = {"X-Forwarded-For": "10.9.8.7"}
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = "application/json"
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        if key:
            headers["Authorization"] = f"Bearer {key}"
            headers["apikey"] = key
        if cookie:
            headers["Cookie"] = cookie
        self.connection.request(method, path, body=data, headers=headers)
        response = self.connection.getresponse()
        raw = response.read()
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = raw
        return response.status, parsed


def operator(args):
    client = Client(args.gatehouse)
    email = f"operator-{uuid.uuid4().hex[:8]}@example.com"
    status, user = client.call(
        "POST", "/auth/v1/admin/users", {"email": email, "password": PASSWORD, "email_confirm": True}, key=args.key)
    assert status in (200, 201), (status, user)
    status, session = client.call("POST", "/auth/v1/token?grant_type=password", {"email": email, "password": PASSWORD})
    assert status == 200, (status, session)
    access = session["access_token"]
    status, factor = client.call("POST", "/auth/v1/factors", {"factor_type": "totp"}, bearer=access)
    assert status == 200, (status, factor)
    totp = pyotp.TOTP(factor["totp"]["secret"])
    status, challenge = client.call("POST", f"/auth/v1/factors/{factor['id']}/challenge", {}, bearer=access)
    assert status == 200, (status, challenge)
    status, raised = client.call(
        "POST", f"/auth/v1/factors/{factor['id']}/verify", {"challenge_id": challenge["id"], "code": totp.now()},
        bearer=access)
    assert status == 200, (status, raised)
    print(json.dumps({"email": email, "access": raised["access_token"], "id": user["id"]}))


def run(args):
    with open(args.operator) as file:
        op = json.load(file)
    client = Client(args.gatehouse)
    cookie = f"gh_session={op['access']}"
    status, page = client.call("GET", "/console/users", cookie=cookie)
    assert status == 200, (status, page[:400])
    # One of the seeded accounts, the operator's own page and a company, found as an operator would.
    pages = [
        ("overview, a day", "/console"),
        ("overview, a week", "/console?range=week"),
        ("users, first page", "/console/users"),
        ("users, search by email", "/console/users?q=seed12345"),
        ("users, search in metadata (a scan)", "/console/users?q=metadata%3Aplan"),
        ("users, filter: has a second factor", "/console/users?has_factor=yes"),
        ("a user", f"/console/users/{op['id']}"),
        ("companies, first page", "/console/companies"),
        ("audit, first page", "/console/audit"),
        ("audit, one action", "/console/audit?action=signed_in"),
        ("keys and settings", "/console/settings"),
    ]
    for name, path in pages:
        times = []
        size = 0
        for attempt in range(3 + args.requests):
            started = time.perf_counter()
            status, body = client.call("GET", path, cookie=cookie)
            elapsed = time.perf_counter() - started
            if status != 200:
                print(f"{path}: {status} {body[:300]!r}", file=sys.stderr)
                sys.exit(1)
            size = len(body)
            if attempt >= 3:
                times.append(elapsed * 1000)
        times.sort()
        p95 = times[max(0, int(len(times) * 0.95) - 1)]
        print(f"| {args.label} | {name} | {statistics.median(times):.1f} | {p95:.1f} | {size / 1024:.1f} |")
        sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("operator")
    one.add_argument("--gatehouse", required=True)
    one.add_argument("--key", required=True)
    two = sub.add_parser("run")
    two.add_argument("--gatehouse", required=True)
    two.add_argument("--operator", required=True)
    two.add_argument("--label", required=True)
    two.add_argument("--requests", type=int, default=30)
    args = parser.parse_args()
    {"operator": operator, "run": run}[args.command](args)


if __name__ == "__main__":
    main()
