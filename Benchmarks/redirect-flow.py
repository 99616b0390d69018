"""The browser redirect flow for Benchmarks/redirect-flow.sh: browsers signing in through Tests/oidc/provider.py (the
tests' OpenID provider, Authlib on Flask) with PKCE, each leg timed, every request the provider answers counted.

    python3 Benchmarks/redirect-flow.py provider --port P
        serves Tests/oidc/provider.py's app, unchanged, behind a WSGI middleware of this file that times and logs every
        request it answers (GET /bench/log answers that log, and is not in it); prints "ready" once it listens.
    python3 Benchmarks/redirect-flow.py run --gatehouse URL --provider URL --key SERVICE_KEY --label L
            [--signins N] [--clients 1,8] [--warm 8] [--pids gatehouse=PID,provider=PID]
        registers a client at the provider and the provider at Gatehouse as custom:acme (the admin API, as
        Tests/supabase/test_oauth.py does), signs `warm` browsers in at once on the cold server (not timed: how many
        times it fetches discovery and the keys), then times, for each client count C, N first sign-ins (a new person
        each) by C browsers at once, and then N returning ones (the people of the last run, again) by the last C;
        with --pids, the CPU time each of those processes, the browsers, PostgreSQL and the kernel's interrupts spent
        per sign-in, and how busy the cores were with anything else (other work on the machine: a noisy run).

One sign-in is what a browser and an app do (as test_oauth.py's Browser, a fresh cookie each time, connections kept):

    browser → Gatehouse  GET  /auth/v1/authorize?provider=custom:acme&redirect_to=APP&code_challenge=…   302
    browser → provider   GET  /authorize?…  (the sign-in form)                                            200
    browser → provider   POST /authorize?…  (approve as the person)                                        302
    browser → Gatehouse  GET  /auth/v1/callback?code=…&state=…  (Gatehouse → provider: POST /token)          302 APP?code=
    app     → Gatehouse  POST /auth/v1/token?grant_type=pkce {auth_code, code_verifier}                       200

Each sign-in comes from an X-Forwarded-For address of its own (Gatehouse trusts loopback), so the per-IP limits on
sign-in starts and code exchanges stay out of the measure. Latencies are as the client saw them (http.client, with its
own overhead); "callback, ours" is the callback less the provider's time on the token request it made (matched by code).
"""

import argparse
import base64
import hashlib
import html
import http.client
import io
import json
import logging
import math
import multiprocessing
import os
import re
import resource
import secrets
import signal
import sys
import threading
import time
import urllib.parse

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
APP_ORIGIN = "http://app.localhost:3000/"
APP = APP_ORIGIN + "auth/callback"
PROVIDER_ID = "custom:acme"


# --- the provider, timed ------------------------------------------------------------------------------------------


ANSWERING = threading.local()  # the request this server thread is answering: when its request line was read


class Timed:
    """WSGI middleware: each request's method, path, status, for POST /token the code presented, and two times:
    `app`, the provider's app from call to body (Flask and Authlib), and `seconds`, from its request line read to its
    answer written (the HTTP server's work too; TimedHandler fills it in). GET /bench/log answers and empties the log."""

    def __init__(self, app):
        self.app = app
        self.log = []
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == "/bench/log":
            with self.lock:
                taken, self.log = self.log, []
            body = json.dumps(taken).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        started = time.monotonic()
        code = None
        if path == "/token" and environ.get("REQUEST_METHOD") == "POST":
            raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(raw)
            code = urllib.parse.parse_qs(raw.decode()).get("code", [None])[0]
        status = []

        def recording_start(line, headers, *rest):
            status.append(int(line.split()[0]))
            return start_response(line, headers, *rest)

        answer = self.app(environ, recording_start)
        try:
            body = b"".join(answer)
        finally:
            if hasattr(answer, "close"):
                answer.close()
        finished = time.monotonic()
        entry = {"method": environ["REQUEST_METHOD"], "path": path, "app": finished - started,
                 "seconds": finished - getattr(ANSWERING, "read", started), "status": status[0] if status else None,
                 "code": code}
        ANSWERING.entry = entry
        with self.lock:
            self.log.append(entry)
        return [body]


def serve_provider(port):
    sys.path.insert(0, os.path.join(ROOT, "Tests", "oidc"))
    import provider  # noqa: E402  (Tests/oidc/provider.py)
    from werkzeug.serving import WSGIRequestHandler, make_server

    class TimedHandler(WSGIRequestHandler):
        """Werkzeug's handler, noting when a request line was read and, once the answer is written, the whole time
        in the request's log entry."""

        def parse_request(self):
            ANSWERING.read, ANSWERING.entry = time.monotonic(), None
            return super().parse_request()

        def run_wsgi(self):
            try:
                super().run_wsgi()
            finally:
                entry = getattr(ANSWERING, "entry", None)
                if entry is not None:
                    entry["seconds"] = time.monotonic() - ANSWERING.read

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request: its time, not its log
    app = provider.create_app(f"http://127.0.0.1:{port}")
    app.wsgi_app = Timed(app.wsgi_app)
    server = make_server("127.0.0.1", port, app, threaded=True, request_handler=TimedHandler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print("ready", flush=True)
    server.serve_forever()


# --- one sign-in --------------------------------------------------------------------------------------------------


def address(run, i):
    """The X-Forwarded-For address of sign-in i of run `run`: one of its own."""
    return f"10.{run}.{(i >> 8) & 255}.{i & 255}" if i < 65536 else f"11.{run}.{(i >> 8) & 255}.{i & 255}"


class Browser:
    """A browser as small as the flow needs, so the load generator takes little of the cores it shares: http.client
    connections kept per origin, redirects not followed, and its one cookie (Gatehouse's gh_oauth_browser, sent back
    on /auth/v1) kept by hand. Tests/supabase/test_oauth.py's Browser does the same with httpx."""

    def __init__(self):
        self.connections = {}
        self.cookie = None

    def request(self, method, url, body=None, headers=None):
        """(status, headers, text) of one request."""
        parts = urllib.parse.urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        headers = dict(headers or {})
        if self.cookie and parts.path.startswith("/auth/v1/"):
            headers["Cookie"] = self.cookie
        for attempt in (0, 1):
            connection = self.connections.get(parts.netloc)
            if connection is None:
                connection = self.connections[parts.netloc] = http.client.HTTPConnection(parts.netloc, timeout=30)
            try:
                connection.request(method, target, body=body, headers=headers)
                answer = connection.getresponse()
                text = answer.read().decode()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                connection.close()
                del self.connections[parts.netloc]
                if attempt:
                    raise
        for name, value in answer.getheaders():
            if name.lower() == "set-cookie" and value.startswith("gh_oauth_browser="):
                self.cookie = value.split(";", 1)[0]
        return answer.status, {name.lower(): value for name, value in answer.getheaders()}, text


def sign_in(browser, gatehouse, run, i, subject):
    """One PKCE sign-in as `subject`: ({leg: seconds}, the provider's code the callback carried), or raises."""
    browser.cookie = None  # a new browser; its connections kept
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    forwarded = {"X-Forwarded-For": address(run, i)}
    query = urllib.parse.urlencode({"provider": PROVIDER_ID, "redirect_to": APP, "code_challenge": challenge,
                                    "code_challenge_method": "s256"})
    times = {}

    def timed(leg, method, url, **options):
        started = time.perf_counter()
        answer = browser.request(method, url, **options)
        times[leg] = time.perf_counter() - started
        return answer

    status, headers, text = timed("authorize", "GET", f"{gatehouse}/auth/v1/authorize?{query}", headers=forwarded)
    assert status == 302 and browser.cookie, f"authorize: {status} {text[:300]}"
    page = headers["location"]
    status, _, text = timed("form", "GET", page)
    assert status == 200 and 'id="approve"' in text, f"form: {status} {text[:300]}"
    action = urllib.parse.urljoin(page, html.unescape(re.search(r'<form[^>]*\baction="([^"]*)"', text).group(1)))
    fields = {"email": f"{subject}@example.com", "sub": subject, "email_verified": "on", "name": "Bench",
              "decision": "approve"}
    status, headers, text = timed("approve", "POST", action, body=urllib.parse.urlencode(fields),
                                  headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 302, f"approve: {status} {text[:300]}"
    callback = headers["location"]
    assert callback.startswith(gatehouse + "/auth/v1/callback?"), callback
    upstream_code = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(callback).query))["code"]
    status, headers, text = timed("callback", "GET", callback, headers=forwarded)
    landing = headers.get("location", "")
    assert status == 302 and landing.startswith(APP), f"callback: {status} {landing[:300]} {text[:300]}"
    code = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(landing).query)).get("code")
    assert code, f"no code: {landing[:300]}"
    status, _, text = timed("pkce", "POST", f"{gatehouse}/auth/v1/token?grant_type=pkce",
                            body=json.dumps({"auth_code": code, "code_verifier": verifier}),
                            headers={**forwarded, "Content-Type": "application/json"})
    assert status == 200 and json.loads(text).get("access_token"), f"pkce: {status} {text[:300]}"
    return times, upstream_code


def worker(gatehouse, run, first, count, subjects, barrier, out):
    """Runs sign-ins [first, first + count) of a run after the shared start; puts their timings and its span."""
    try:
        results = []
        browser = Browser()
        # One request first, so every browser has its connection to Gatehouse before the clock starts.
        browser.request("GET", f"{gatehouse}/health/ready")
        barrier.wait(timeout=60)
        started = time.monotonic()
        for i in range(first, first + count):
            try:
                results.append(sign_in(browser, gatehouse, run, i, subjects[i]))
            except AssertionError as failed:  # a refused step: counted, and the next sign-in goes on
                results.append((None, str(failed).split("\n")[0][:200]))
        out.put((results, started, time.monotonic()))
    except BaseException as error:
        out.put(f"sign-in failed: {error!r}")
        raise


def run_signins(gatehouse, run, subjects, clients):
    """The sign-ins of `subjects` by `clients` browsers at once, each a process of its own: (results, seconds)."""
    context = multiprocessing.get_context("fork")
    barrier, out = context.Barrier(clients), context.Queue()
    share = [len(subjects) // clients + (1 if c < len(subjects) % clients else 0) for c in range(clients)]
    processes = [context.Process(target=worker, args=(gatehouse, run, sum(share[:c]), share[c], subjects, barrier,
                                                      out)) for c in range(clients)]
    for process in processes:
        process.start()
    done = [out.get() for _ in processes]
    for process in processes:
        process.join()
    for part in done:
        if isinstance(part, str):
            raise SystemExit(part)
    results = [result for part in done for result in part[0]]
    return results, max(part[2] for part in done) - min(part[1] for part in done)


# --- figures ------------------------------------------------------------------------------------------------------


def percentile(values, fraction):
    """Nearest-rank percentile, in milliseconds."""
    ordered = sorted(values)
    return 1000 * ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def spread(values):
    return f"{percentile(values, 0.5):.1f}/{percentile(values, 0.99):.1f}"


def cpu_seconds(pids):
    """CPU seconds (user + system) so far: of each named process, of this process's finished children (the browsers),
    of PostgreSQL's processes, of the kernel's interrupts, and of the whole machine (`machine`)."""
    ticks = os.sysconf("SC_CLK_TCK")

    def process(pid):
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks

    used = {name: process(pid) for name, pid in pids.items()}
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    used["browsers"] = children.ru_utime + children.ru_stime
    used["postgres"] = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as comm:
                if comm.read().strip() == "postgres":
                    used["postgres"] += process(pid)
        except OSError:
            pass  # gone meanwhile (a backend that ended is not counted)
    with open("/proc/stat") as stat:
        jiffies = [int(field) for field in stat.readline().split()[1:]]
    used["interrupts"] = (jiffies[5] + jiffies[6]) / ticks  # irq and softirq: loopback traffic, mostly
    used["machine"] = (sum(jiffies[:8]) - jiffies[3] - jiffies[4]) / ticks  # all but idle and iowait
    return used


def provider_log(http):
    return http.get("/bench/log").json()


def summarize(label, kind, clients, results, seconds, log, cpu):
    """One run's line: rate, each leg's p50/p99 (ms), the provider's own time, and what the provider answered."""
    failed = [why for times, why in results if times is None]
    results = [result for result in results if result[0] is not None]
    legs = {leg: [times[leg] for times, _ in results] for leg in ("authorize", "form", "approve", "callback", "pkce")}
    token_time = {entry["code"]: entry["seconds"] for entry in log if entry["path"] == "/token"}
    own = [times["callback"] - token_time[code] for times, code in results if code in token_time]
    served = {}
    for entry in log:
        key = f"{entry['method']} {entry['path']}"
        served.setdefault(key, []).append(entry["seconds"])
    whole = [sum(times.values()) for times, _ in results]
    print(f"{kind} store={label} clients={clients} signins={len(results)} seconds={seconds:.2f} "
          f"rate={len(results) / seconds:.1f}/s signin_p50/p99_ms={spread(whole)} failed={len(failed)}"
          + (f" (first: {failed[0]})" if failed else ""))
    print(f"  gatehouse ms p50/p99: authorize={spread(legs['authorize'])} callback={spread(legs['callback'])} "
          f"callback_ours={spread(own)} pkce={spread(legs['pkce'])}")
    print(f"  provider ms p50/p99, as the browser saw it: form={spread(legs['form'])} approve={spread(legs['approve'])}"
          f"; its server's (request read to answer written): "
          + " ".join(f"{key.replace(' ', '')}={spread(values)}" for key, values in sorted(served.items())))
    apps = {}
    for entry in log:
        apps.setdefault(f"{entry['method']}{entry['path']}", []).append(entry["app"])
    print("  provider's app alone (Flask, Authlib) ms p50/p99: "
          + " ".join(f"{key}={spread(values)}" for key, values in sorted(apps.items())))
    machine = cpu.pop("machine")
    if not cpu["postgres"]:
        cpu.pop("postgres")
    ours = sum(cpu.values())
    print("  CPU ms per sign-in: " + " ".join(f"{name}={1000 * used / len(results):.1f}" for name, used in cpu.items())
          + f"; cores busy: these {ours / seconds:.2f}, anything else {max(0, machine - ours) / seconds:.2f}")
    per = {key: len(values) / (len(results) + len(failed)) for key, values in sorted(served.items())}
    print("  provider requests per sign-in: " + " ".join(f"{key.replace(' ', '')}={value:g}"
                                                          for key, value in per.items()))
    sys.stdout.flush()


def register(gatehouse, provider, key):
    """A client at the provider for this Gatehouse's callback, and the provider at Gatehouse as custom:acme."""
    client_id, secret = f"bench-{secrets.token_hex(5)}", secrets.token_hex(16)
    with httpx.Client(timeout=30, trust_env=False) as http:
        answer = http.post(f"{provider}/admin/clients", json={
            "client_id": client_id, "client_secret": secret, "redirect_uris": [f"{gatehouse}/auth/v1/callback"],
            "token_endpoint_auth_method": "client_secret_basic"})
        assert answer.status_code == 201, answer.text
        answer = http.post(f"{gatehouse}/auth/v1/admin/custom-providers",
                           headers={"Authorization": f"Bearer {key}", "apikey": key},
                           json={"provider_type": "oidc", "identifier": PROVIDER_ID, "name": "Acme",
                                 "client_id": client_id, "client_secret": secret, "issuer": provider,
                                 "scopes": ["email", "profile"], "pkce_enabled": True})
        assert answer.status_code == 201, f"{answer.status_code} {answer.text}"


def run(options):
    clients = [int(c) for c in options.clients.replace(",", " ").split()]
    register(options.gatehouse, options.provider, options.key)
    prefix = secrets.token_hex(3)
    provider = httpx.Client(base_url=options.provider, timeout=30, trust_env=False)
    provider_log(provider)  # the registration's own request, out of the counts
    fetched = {"discovery": 0, "jwks": 0}

    def count_fetches(log):
        fetched["discovery"] += sum(e["path"] == "/.well-known/openid-configuration" for e in log)
        fetched["jwks"] += sum(e["path"] == "/jwks" for e in log)

    # Cold: `warm` browsers at once on a server that has not fetched discovery or the keys yet.
    warm = [f"warm-{prefix}-{i}" for i in range(options.warm)]
    results, _ = run_signins(options.gatehouse, 1, warm, options.warm)
    failed = sum(times is None for times, _ in results)
    count_fetches(provider_log(provider))
    print(f"cold store={options.label} clients={options.warm}: the first {options.warm} sign-ins at once fetched "
          f"discovery {fetched['discovery']}x, the JWKS {fetched['jwks']}x" + (f"; {failed} failed" if failed else ""))
    sys.stdout.flush()
    run_number = 2
    pids = dict(pair.split("=") for pair in options.pids.split(",")) if options.pids else {}

    def timed_run(kind, people, count, number):
        before = cpu_seconds(pids)
        results, seconds = run_signins(options.gatehouse, number, people, count)
        after = cpu_seconds(pids)
        log = provider_log(provider)
        count_fetches(log)
        summarize(options.label, kind, count, results, seconds, log,
                  {name: after[name] - before[name] for name in after})

    for count in clients:
        people = [f"p-{prefix}-{count}-{i}" for i in range(options.signins)]
        timed_run("first", people, count, run_number)
        run_number += 1
    timed_run("returning", people, clients[-1], run_number)
    print(f"fetches store={options.label}: discovery {fetched['discovery']}x, JWKS {fetched['jwks']}x over the "
          f"server's life ({options.warm + options.signins * (len(clients) + 1)} sign-ins)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    serving = commands.add_parser("provider")
    serving.add_argument("--port", type=int, required=True)
    running = commands.add_parser("run")
    running.add_argument("--gatehouse", required=True)
    running.add_argument("--provider", required=True)
    running.add_argument("--key", required=True)
    running.add_argument("--label", required=True)
    running.add_argument("--signins", type=int, default=500)
    running.add_argument("--clients", default="1,8")
    running.add_argument("--warm", type=int, default=8)
    running.add_argument("--pids", help="name=pid,... of processes whose CPU time to report (gatehouse, provider)")
    options = parser.parse_args()
    if options.command == "provider":
        serve_provider(options.port)
    else:
        run(options)


if __name__ == "__main__":
    main()
