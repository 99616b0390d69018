"""What the supabase-auth tests stand on: a gatehouse server of their own, its outbox, and Supabase's official Python
client (`supabase-auth`, pinned in scripts/requirements-test.txt) pointed at its /auth/v1.

Every test gets a fresh server on a free loopback port with a throwaway data folder and no SMTP, so its mail lands in
<data>/outbox/*.eml; the server is stopped whatever the test did. Nothing here waits a fixed time: readiness, mail and
the server's clock are polled until they answer or a deadline passes.

The binary is $GATEHOUSE_BINARY (scripts/supabase-client-test.sh sets it), else .build/debug/gatehouse.
"""

import email
import email.policy
import email.utils
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import httpx
import jwt
import pytest
from supabase_auth import SyncGoTrueClient

WAIT = 15  # seconds a start, a mail or an answer may take
POLL = 0.05  # polling interval while waiting for state, not a wait for state
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("GATEHOUSE_BINARY") or os.path.join(ROOT, ".build", "debug", "gatehouse")
PASSWORD = "correct horse battery staple"


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "serve(*flags): extra `gatehouse serve` flags for the server of this test (or of a module's tests); "
        "{port} in a flag is the server's port",
    )
    # A TERM (scripts/supabase-client-test.sh's cleanup, a timeout) ends the run like Ctrl-C, so the fixtures still
    # stop their servers and remove their data folders.
    signal.signal(signal.SIGTERM, signal.default_int_handler)


# --- the server ------------------------------------------------------------------------------------------------


class Client(SyncGoTrueClient):
    """The official client as a test uses it: the session in memory, no background refresh (a timer thread would
    refresh behind the test's back), and a record of every answer it got. The record only observes: what a user of the
    client sees is still what the client returns or raises; `answers` is there to say what came over the wire when the
    client does not show it."""

    def __init__(self, url, headers=None, flow_type="implicit"):
        self.answers = []  # httpx.Response, oldest first, bodies read
        # As the client makes its own (redirects followed, HTTP/2 offered), but never through a proxy of the
        # environment: the server is on loopback.
        http = httpx.Client(
            follow_redirects=True,
            http2=True,
            timeout=WAIT,
            trust_env=False,
            event_hooks={"response": [self._record]},
        )
        super().__init__(
            url=url,
            headers=headers,
            auto_refresh_token=False,
            persist_session=False,
            http_client=http,
            flow_type=flow_type,
        )

    def _record(self, response):
        response.read()
        self.answers.append(response)

    @property
    def last_answer(self):
        return self.answers[-1] if self.answers else None


class Server:
    """One `gatehouse serve` process: its URL, its outbox, the clients pointed at it."""

    def __init__(self, binary, flags):
        self.binary = binary
        self.port = free_port()
        # "{port}" in a flag is this port: `--public-url http://localhost:{port}`.
        self.flags = [flag.replace("{port}", str(self.port)) for flag in flags]
        self.work = tempfile.mkdtemp(prefix="gatehouse-supabase.")
        self.data_dir = os.path.join(self.work, "data")
        self.base = f"http://127.0.0.1:{self.port}"
        self.auth_url = self.base + "/auth/v1"
        self.mailbox = Mailbox(os.path.join(self.data_dir, "outbox"))
        self.clients = []
        self.process = None
        self.log_path = os.path.join(self.work, "server.log")

    def start(self):
        command = [self.binary, "serve", "--port", str(self.port), "--data-dir", self.data_dir, "--log-level", "error"]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(command + self.flags, stdout=log, stderr=subprocess.STDOUT)
        end = time.monotonic() + WAIT
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"`{' '.join(command[1:2] + self.flags)}` exited with {self.process.returncode}: {self.log()}"
                )
            if self.get("/health/ready")[0] == 200:
                return self
            if time.monotonic() > end:
                raise RuntimeError(f"the server did not become ready at {self.base} within {WAIT}s: {self.log()}")
            time.sleep(POLL)

    def stop(self):
        for client in self.clients:
            client.close()
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        # pytest shows this only for a test that failed: what the server said about it.
        if self.log():
            print(f"server log ({' '.join(self.flags) or 'default flags'}):\n{self.log()}")
        shutil.rmtree(self.work, ignore_errors=True)

    def log(self):
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as file:
                return file.read().strip()
        except FileNotFoundError:
            return ""

    def client(self, headers=None, flow_type="implicit"):
        """A new official client with no session, like a fresh app install; `headers` go on every request it makes,
        its admin API's included. `flow_type` is the client's: "implicit" (its default) or "pkce"."""
        client = Client(self.auth_url, headers, flow_type)
        self.clients.append(client)
        return client

    def service_client(self, key):
        """An official client for a backend holding the service key `key`: both headers carry it, as supabase-py's
        create_client sets them for the service role. Its `admin` is the admin API."""
        return self.client({"Authorization": f"Bearer {key}", "apikey": key})

    def keys(self, *arguments):
        """Runs `gatehouse keys ARGUMENTS --data-dir <this server's data>` beside the running server (the store is
        SQLite in WAL mode) and returns what it printed on stdout. It is given the server's port and public URL, as an
        operator would: a service key names the server it is for, and a server with another issuer refuses it."""
        issuer = ["--port", str(self.port)]
        for at, flag in enumerate(self.flags):
            if flag == "--public-url":
                issuer += self.flags[at : at + 2]
            elif flag.startswith("--public-url="):
                issuer.append(flag)
        command = [self.binary, "keys", *arguments, "--data-dir", self.data_dir, *issuer]
        done = subprocess.run(command, capture_output=True, text=True, timeout=WAIT)
        assert done.returncode == 0, (
            f"`gatehouse keys {' '.join(arguments)}` exited with {done.returncode}: {done.stderr.strip()}"
        )
        return done.stdout.strip()

    def mint_service_key(self, *flags):
        """A new service key (`gatehouse keys service-key`, which prints the key alone on stdout)."""
        key = self.keys("service-key", *flags)
        assert key and "\n" not in key, f"`gatehouse keys service-key` printed more than a key: {key!r}"
        return key

    def get(self, path):
        """(status, headers) of a plain GET; no answer at all is status None."""
        try:
            with DIRECT.open(self.base + path, timeout=WAIT) as response:
                return response.status, response.headers
        except urllib.error.HTTPError as error:
            return error.code, error.headers
        except OSError:
            return None, None

    def clock(self):
        """The server's time in whole seconds, from the Date header of its answer."""
        status, headers = self.get("/health/ready")
        assert status == 200 and headers["Date"], f"no dated answer from {self.base}/health/ready: {status}"
        return email.utils.parsedate_to_datetime(headers["Date"]).timestamp()

    def wait_for_clock(self, moment, deadline):
        """Polls the server's clock until it reads `moment` or later (a window of time the server keeps, such as the
        refresh token reuse interval, has passed for it), failing after `deadline` seconds."""
        end = time.monotonic() + deadline
        while self.clock() < moment:
            assert time.monotonic() < end, f"the server's clock did not reach {moment} within {deadline}s"
            time.sleep(POLL * 4)


DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback needs no proxy


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def servers():
    """Starts servers for one test: `servers.start(*flags)`; every one is stopped when the test ends, however."""

    class Servers:
        def __init__(self):
            self.running = []

        def start(self, *flags):
            server = Server(BINARY, flags)
            self.running.append(server)
            return server.start()

    started = Servers()
    try:
        yield started
    finally:
        for server in started.running:
            try:
                server.stop()
            except Exception as error:  # the others are still stopped
                print(f"stopping the server at {server.base} failed: {error!r}")


@pytest.fixture
def server(request, servers):
    """This test's server, started with the flags of its `serve` mark (or its module's), if any."""
    mark = request.node.get_closest_marker("serve")
    return servers.start(*(mark.args if mark else ()))


# --- the outbox -------------------------------------------------------------------------------------------------


class Mail:
    """One mail of the outbox, as its reader would use it: the 6-digit code and the verify link."""

    def __init__(self, path, message):
        self.path = path
        self.to = [address.lower() for _, address in email.utils.getaddresses([str(message["To"] or "")])]
        self.subject = str(message["Subject"] or "")
        part = message.get_body(preferencelist=("plain",))
        self.text = part.get_content().replace("\r", "") if part else ""
        found = re.search(r"^\s*(\d{6})\s*$", self.text, re.M)
        self.code = found.group(1) if found else None
        links = re.findall(r"https?://\S+/auth/v1/verify\?\S+", self.text)
        self.link = links[0] if links else None
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.link).query) if self.link else {}
        # GoTrue's link carries the token hash as `token`: verify_otp({"token_hash": ..., "type": ...}) takes it.
        self.token_hash = query.get("token", [None])[0]
        self.type = query.get("type", [None])[0]

    def __repr__(self):
        return f"<mail to {', '.join(self.to)}: {self.subject!r}, code {self.code}, link type {self.type}>"


class Mailbox:
    """The development outbox: one .eml per mail, written under a hidden name and renamed when whole. Each mail is
    handed out once, so asking again waits for a newer one."""

    def __init__(self, directory):
        self.directory = directory
        self.seen = set()

    def newest(self, to, subject=None, with_code=False, deadline=WAIT):
        """The newest mail to `to` not handed out yet (whose subject contains `subject`, and which carries a code if
        `with_code`), waiting for one to arrive. Older matching mails are handed out with it: they are stale."""
        end = time.monotonic() + deadline
        while True:
            matching = [
                mail
                for mail in map(self._read, self._files())
                if mail is not None
                and mail.path not in self.seen
                and to.lower() in mail.to
                and (subject is None or subject.lower() in mail.subject.lower())
                and (mail.code or not with_code)
            ]
            if matching:
                self.seen.update(mail.path for mail in matching)
                return matching[-1]
            if time.monotonic() > end:
                wanted = f"to {to}" + (f" with {subject!r} in the subject" if subject else "")
                wanted += " with a code" if with_code else ""
                raise AssertionError(f"no new mail {wanted} in the outbox within {deadline}s; it holds {self.all()}")
            time.sleep(POLL)

    def all(self):
        return [mail for mail in map(self._read, self._files()) if mail is not None]

    def _files(self):
        try:
            names = [n for n in os.listdir(self.directory) if n.endswith(".eml") and not n.startswith(".")]
        except FileNotFoundError:
            return []
        paths = [os.path.join(self.directory, n) for n in names]
        return sorted(paths, key=lambda p: (os.stat(p).st_mtime_ns, p))

    @staticmethod
    def _read(path):
        try:
            with open(path, "rb") as file:
                return Mail(path, email.message_from_bytes(file.read(), policy=email.policy.default))
        except (OSError, ValueError):
            return None  # removed or unreadable: another poll will tell


@pytest.fixture
def mailbox(server):
    return server.mailbox


@pytest.fixture
def service(server):
    """An official client holding a service key of this test's server, as a backend makes one; `service.admin` is
    its admin API (`SyncGoTrueAdminAPI`), whose answers `service.answers` records like any other."""
    key = server.mint_service_key()
    service = server.service_client(key)
    service.key = key
    return service


# --- accounts ---------------------------------------------------------------------------------------------------


def new_email(label="user"):
    """An address no other test uses."""
    return f"{label}-{uuid.uuid4().hex[:10]}@example.com"


@pytest.fixture
def confirmed_account(server):
    """Makes a confirmed account the way an app does: sign_up, then verify_otp type signup with the mailed code.
    Returns (client, email), the client holding the session the confirmation gave."""

    def make(address=None, password=PASSWORD, data=None):
        address = address or new_email()
        client = server.client()
        options = {"data": data} if data else {}
        signed_up = client.sign_up({"email": address, "password": password, "options": options})
        assert signed_up.session is None, "sign-up gave a session before the address was confirmed"
        code = server.mailbox.newest(address, with_code=True).code
        confirmed = client.verify_otp({"email": address, "token": code, "type": "signup"})
        assert confirmed.session is not None, f"verify_otp(signup) for {address} gave no session"
        return client, address

    return make


def claims(access_token):
    """The payload of an access token, as an app reads it without the key (the client does the same)."""
    return jwt.decode(access_token, options={"verify_signature": False})
