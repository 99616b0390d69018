"""Invitation round trips for Benchmarks/invitations.sh (and the company owner Benchmarks/saml.sh starts from).

    python3 Benchmarks/invitations.py owner --gatehouse URL --data-dir DIR
        signs an owner up (the code read from DIR/outbox), makes a company with a credential, logs in to it and prints
        one JSON line: {"cid", "email", "access", "company"} (the account and the company session). The caller then
        puts the company on the Enterprise tier with `gatehouse companies set-tier CID enterprise` (no participant
        limit), the server stopped.
    python3 Benchmarks/invitations.py run --gatehouse URL --key SERVICE_KEY --data-dir DIR --owner FILE --label L
            [--count N] [--clients "1 8"] [--flows M]
        makes 2 x N invitee accounts with confirmed addresses (admin API: a user with email_confirm, a magic link
        generated and verified, so no password hash), then for each client count C:
          invite  N invitations by the owner's company session, C at once (POST /v1/companies/{cid}/invitations)
          accept  those N by their invitees, C at once (POST /v1/invitations/{id}/accept, by the invitation's id)
        and last M whole round trips one at a time: invite, wait for the mail in the outbox (DIR/outbox/*.eml), accept
        with the mailed six-digit code, the mail's delay and the whole trip timed.

Every request comes from an X-Forwarded-For address of its own (Gatehouse trusts loopback), so the per-IP limits
(accepts share the verification limit) stay out of the measure. Latencies are as the client saw them (http.client,
connections kept, one per thread).
"""

import argparse
import email
import email.policy
import glob
import http.client
import json
import math
import os
import quopri
import re
import sys
import threading
import time
import urllib.parse
import uuid

PASSWORD = "bench password 1"
COMPANY_PASSWORD = "company password 1"


class Client:
    """One keep-alive connection to Gatehouse (one per thread)."""

    def __init__(self, base):
        self.netloc = urllib.parse.urlsplit(base).netloc
        self.connection = None

    def call(self, method, path, body=None, bearer=None, key=None, forwarded=None, raw=None, content_type=None,
             accept=None):
        """(status, parsed JSON or text, headers) of one request."""
        headers = {"Accept": accept} if accept else {}
        if raw is not None:
            data = raw
            headers["Content-Type"] = content_type or "application/x-www-form-urlencoded"
        elif body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = "application/json"
        else:
            data = None
        if bearer:
            headers["Authorization"] = "Bearer " + bearer
        if key:
            headers["Authorization"] = "Bearer " + key
            headers["apikey"] = key
        if forwarded:
            headers["X-Forwarded-For"] = forwarded
        for attempt in (0, 1):
            if self.connection is None:
                self.connection = http.client.HTTPConnection(self.netloc, timeout=60)
            try:
                self.connection.request(method, path, body=data, headers=headers)
                answer = self.connection.getresponse()
                text = answer.read().decode()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.connection.close()
                self.connection = None
                if attempt:
                    raise
        try:
            parsed = json.loads(text) if text else {}
        except ValueError:
            parsed = text
        return answer.status, parsed, {name.lower(): value for name, value in answer.getheaders()}


def address(run, i):
    """An X-Forwarded-For address of its own for request i of run `run`."""
    return f"10.{run % 250}.{(i >> 8) & 255}.{i & 255}" if i < 65536 else f"11.{run % 250}.{(i >> 8) & 255}.{i & 255}"


def percentile(values, fraction):
    """Nearest-rank percentile, in milliseconds."""
    ordered = sorted(values)
    return 1000 * ordered[max(0, math.ceil(fraction * len(ordered)) - 1)] if ordered else float("nan")


def parallel(items, clients, base, work):
    """Runs work(client, index, item) -> seconds or raises, over items with `clients` threads at once after a common
    start; returns ([seconds of each success], [first errors], wall seconds)."""
    times, errors, lock = [], [], threading.Lock()
    barrier = threading.Barrier(clients + 1)
    share = [list(range(k, len(items), clients)) for k in range(clients)]

    def thread(indexes):
        client = Client(base)
        barrier.wait()
        for index in indexes:
            try:
                seconds = work(client, index, items[index])
                with lock:
                    times.append(seconds)
            except Exception as error:  # noqa: BLE001 (reported, counted)
                with lock:
                    errors.append(str(error)[:300])

    threads = [threading.Thread(target=thread, args=(indexes,)) for indexes in share]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    return times, errors, time.perf_counter() - started


def report(label, kind, clients, times, errors, seconds):
    rate = len(times) / seconds if seconds else 0
    print(f"{kind} store={label} clients={clients} n={len(times)} errors={len(errors)} seconds={seconds:.2f} "
          f"rps={rate:.1f} p50_ms={percentile(times, 0.5):.2f} p99_ms={percentile(times, 0.99):.2f} "
          f"max_ms={percentile(times, 1.0):.2f}", flush=True)
    if errors:
        print(f"  first error: {errors[0]}", file=sys.stderr, flush=True)


# --- mail ------------------------------------------------------------------------------------------------------------


def mail_text(path):
    return quopri.decodestring(open(path, "rb").read()).decode(errors="replace")


def body_text(raw):
    """The text/plain part of a mail (as the tests read it: the first six-digit number in it is the code)."""
    message = email.message_from_string(raw, policy=email.policy.default)
    part = message.get_body(preferencelist=("plain",)) if message.is_multipart() else message
    return part.get_content() if part is not None else raw


def wait_for_mail(data_dir, email, seen, timeout=30):
    """The text of the first mail to `email` in DIR/outbox not in `seen` (a set of paths, updated)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in glob.glob(os.path.join(data_dir, "outbox", "*.eml")):
            if path in seen:
                continue
            try:
                text = mail_text(path)
            except OSError:
                continue
            if email not in text:
                continue  # not ours (yet): read again next time, it may be another's
            seen.add(path)
            return text
        time.sleep(0.002)
    raise TimeoutError(f"no mail to {email} in {timeout} s")


# --- setup -----------------------------------------------------------------------------------------------------------


def owner(base, data_dir):
    """Signs up, confirms from the outbox, makes a company with a credential and logs in to it."""
    client = Client(base)
    email = f"owner-{uuid.uuid4().hex[:8]}@example.com"
    status, answer, _ = client.call("POST", "/auth/v1/signup", {"email": email, "password": PASSWORD})
    assert status == 200, f"signup {status} {answer}"
    text = wait_for_mail(data_dir, email, set())
    code = re.search(r"^(\d{6})\r?$", text, re.M).group(1)
    status, answer, _ = client.call("POST", "/auth/v1/verify", {"type": "signup", "email": email, "token": code})
    assert status == 200, f"verify {status} {answer}"
    access = answer["access_token"]
    status, answer, _ = client.call("POST", "/v1/companies", {"name": "Bench Co"}, bearer=access)
    assert status in (200, 201), f"company {status} {answer}"
    cid = answer["id"]
    credential = {"username": "bench", "password": COMPANY_PASSWORD}
    status, answer, _ = client.call("PUT", f"/v1/companies/{cid}/credential", credential, bearer=access)
    assert status in (200, 201, 204), f"credential {status} {answer}"
    status, answer, _ = client.call("POST", f"/v1/companies/{cid}/login", credential, bearer=access)
    assert status == 200, f"login {status} {answer}"
    return {"cid": cid, "email": email, "access": access, "company": answer["access_token"]}


def invitee(client, key, email, forwarded):
    """An account with `email` confirmed, and an account session for it (no password: a magic link verified)."""
    status, answer, _ = client.call("POST", "/auth/v1/admin/users", {"email": email, "email_confirm": True}, key=key)
    assert status in (200, 201), f"admin user {status} {answer}"
    status, answer, _ = client.call("POST", "/auth/v1/admin/generate_link", {"type": "magiclink", "email": email},
                                    key=key)
    assert status == 200, f"generate_link {status} {answer}"
    status, answer, _ = client.call("POST", "/auth/v1/verify",
                                    {"type": "magiclink", "token_hash": answer["hashed_token"]}, forwarded=forwarded)
    assert status == 200, f"verify {status} {answer}"
    return answer["access_token"]


def make_invitees(base, key, prefix, count, run):
    """`count` invitees: [(email, access)], made 8 at once."""
    emails = [f"{prefix}-{i}@example.com" for i in range(count)]
    tokens = [None] * count

    def work(client, index, email):
        tokens[index] = invitee(client, key, email, address(run, index))
        return 0.0

    _, errors, seconds = parallel(emails, 8, base, work)
    assert not errors, errors[:3]
    print(f"  made {count} invitees in {seconds:.1f} s", file=sys.stderr, flush=True)
    return list(zip(emails, tokens))


# --- the runs --------------------------------------------------------------------------------------------------------


def run(options):
    owner_record = json.load(open(options.owner))
    cid, company = owner_record["cid"], owner_record["company"]
    clients = [int(c) for c in options.clients.replace(",", " ").split()]
    prefix = uuid.uuid4().hex[:6]
    run_number = 1
    for count in clients:
        people = make_invitees(options.gatehouse, options.key, f"inv-{prefix}-{count}", options.count, run_number)
        run_number += 1
        ids = [None] * len(people)

        def invite(client, index, person):
            started = time.perf_counter()
            status, answer, _ = client.call("POST", f"/v1/companies/{cid}/invitations",
                                            {"email": person[0], "role": "member"}, bearer=company)
            seconds = time.perf_counter() - started
            assert status == 201, f"invite {status} {answer}"
            ids[index] = answer["id"]
            return seconds

        report(options.label, "invite", count, *parallel(people, count, options.gatehouse, invite))
        made = [(ids[i], people[i][1]) for i in range(len(people)) if ids[i]]
        this_run = run_number
        run_number += 1

        def accept(client, index, item):
            invitation, access = item
            started = time.perf_counter()
            status, answer, _ = client.call("POST", f"/v1/invitations/{invitation}/accept", {},
                                            bearer=access, forwarded=address(this_run, index))
            seconds = time.perf_counter() - started
            assert status == 200 and answer.get("id") == cid, f"accept {status} {answer}"
            return seconds

        report(options.label, "accept", count, *parallel(made, count, options.gatehouse, accept))

    # Whole round trips, one at a time: invite → the mail in the outbox → accept with its code.
    if options.flows:
        people = make_invitees(options.gatehouse, options.key, f"flow-{prefix}", options.flows, run_number)
        run_number += 1
        client = Client(options.gatehouse)
        seen = set(glob.glob(os.path.join(options.data_dir, "outbox", "*.eml")))
        trips, mails, accepts, errors = [], [], [], []
        started_all = time.perf_counter()
        for index, (email, access) in enumerate(people):
            try:
                started = time.perf_counter()
                status, answer, _ = client.call("POST", f"/v1/companies/{cid}/invitations",
                                                {"email": email, "role": "member"}, bearer=company)
                assert status == 201, f"invite {status} {answer}"
                text = wait_for_mail(options.data_dir, email, seen)
                mailed = time.perf_counter()
                code = re.search(r"\b(\d{6})\b", body_text(text)).group(1)
                status, answer, _ = client.call("POST", f"/v1/invitations/{code}/accept", {}, bearer=access,
                                                forwarded=address(run_number, index))
                assert status == 200 and answer.get("id") == cid, f"accept by code {status} {answer}"
                finished = time.perf_counter()
                trips.append(finished - started)
                mails.append(mailed - started)
                accepts.append(finished - mailed)
            except Exception as error:  # noqa: BLE001
                errors.append(str(error)[:300])
        seconds = time.perf_counter() - started_all
        report(options.label, "round-trip", 1, trips, errors, seconds)
        print(f"round-trip-legs store={options.label} invite_to_mail_p50_ms={percentile(mails, 0.5):.2f} "
              f"invite_to_mail_p99_ms={percentile(mails, 0.99):.2f} accept_p50_ms={percentile(accepts, 0.5):.2f} "
              f"accept_p99_ms={percentile(accepts, 0.99):.2f}", flush=True)
    status, answer, _ = Client(options.gatehouse).call("GET", f"/v1/companies/{cid}/members", bearer=company)
    members = answer.get("members", []) if isinstance(answer, dict) else []
    print(f"members store={options.label}: {len(members)} (owner included)", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    making = commands.add_parser("owner")
    making.add_argument("--gatehouse", required=True)
    making.add_argument("--data-dir", required=True)
    running = commands.add_parser("run")
    running.add_argument("--gatehouse", required=True)
    running.add_argument("--key", required=True)
    running.add_argument("--data-dir", required=True)
    running.add_argument("--owner", required=True, help="the file `owner` wrote")
    running.add_argument("--label", required=True)
    running.add_argument("--count", type=int, default=1000)
    running.add_argument("--clients", default="1 8")
    running.add_argument("--flows", type=int, default=200)
    options = parser.parse_args()
    if options.command == "owner":
        print(json.dumps(owner(options.gatehouse, options.data_dir)))
    else:
        run(options)


if __name__ == "__main__":
    main()
