"""The OAuth provider's token endpoint and id tokens, for Benchmarks/oauth-server.sh. wrk sends the timed requests;
this script prepares what they send, outside the timed part, and verifies id tokens.

    python3 Benchmarks/oauth-server.py setup --gatehouse URL --key SERVICE_KEY --out DIR
        WORKERS users with a password, a confidential client for the code flow (authorization_code, refresh_token;
        scopes openid email profile), one like it for scope email alone (no id token), and a confidential client for
        client_credentials; writes DIR/setup.json, DIR/cc.body (the client credentials form) and DIR/{app,plain,
        machine}.auth (each client's Basic header).
    python3 Benchmarks/oauth-server.py chains --gatehouse URL --out DIR --count N
        N account refresh tokens (password sign-ins) to DIR/account.tokens, and N OAuth refresh tokens (code
        exchanges) to DIR/oauth.tokens (openid email profile) and DIR/plain.tokens (email), one a line: the starts of
        N rotation chains each.
    python3 Benchmarks/oauth-server.py codes --gatehouse URL --out DIR --count N [--seconds S]
        up to N approved codes (fewer when S seconds run out: a code lives 60 s), each as the form body of its exchange
        (redirect URI and PKCE verifier), one a line, to DIR/codes.body.
    python3 Benchmarks/oauth-server.py verify --gatehouse URL --out DIR --count N
        N id tokens from code exchanges and N of the account's own access tokens, each verified against the JWKS (with
        the claims an OpenID client checks) by PyJWT and by authlib.jose; prints µs per verification and the sizes.
    python3 Benchmarks/oauth-server.py table RESULTS
        the Markdown table of the wrk lines in RESULTS, with each rate beside the account refresh at that store and
        concurrency.
"""

import argparse
import base64
import hashlib
import http.client
import itertools
import json
import random
import secrets
import statistics
import sys
import threading
import time
import urllib.parse
import uuid
from concurrent.futures import ThreadPoolExecutor

PASSWORD = "bench password 1"
REDIRECT = "http://localhost:8765/callback"
SCOPE = "openid email profile"
# A client's scope without openid: its refresh signs no id token.
PLAIN_SCOPE = "email"
# Threads that prepare codes, each with a user of its own.
WORKERS = 8


def forwarded():
    """A client address of its own for each call: per-address limits stay out of the figures."""
    return f"10.{random.randint(0, 255)}.{random.randint(0, 255)}.{random.randint(1, 254)}"


class Client:
    """One kept connection to the server; a connection per thread."""

    def __init__(self, base):
        self.netloc = urllib.parse.urlsplit(base).netloc
        self.connection = http.client.HTTPConnection(self.netloc, timeout=60)

    def call(self, method, path, body=None, headers=None, form=False, expect=(200,)):
        headers = {"X-Forwarded-For": forwarded(), **(headers or {})}
        if body is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded" if form else "application/json"
            body = urllib.parse.urlencode(body) if form else json.dumps(body)
        self.connection.request(method, path, body=body, headers=headers)
        response = self.connection.getresponse()
        data = response.read()
        if response.status not in expect:
            sys.exit(f"{method} {path}: {response.status} {data[:300]!r}")
        return response, data


_local = threading.local()


def client(base):
    if getattr(_local, "client", None) is None:
        _local.client = Client(base)
    return _local.client


def bearer(token):
    return {"Authorization": f"Bearer {token}", "apikey": token}


def basic(client_id, secret):
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


def load(out):
    with open(f"{out}/setup.json") as source:
        return json.load(source)


def sign_in(base, email):
    _, data = client(base).call("POST", "/auth/v1/token?grant_type=password", {"email": email, "password": PASSWORD})
    return json.loads(data)


def setup(args):
    c = Client(args.gatehouse)
    emails = [f"bench-{uuid.uuid4().hex[:10]}@example.com" for _ in range(WORKERS)]
    for email in emails:
        c.call("POST", "/auth/v1/admin/users", {"email": email, "password": PASSWORD, "email_confirm": True},
               headers=bearer(args.key), expect=(200, 201))

    def register(**fields):
        body = {"client_name": "Bench", "redirect_uris": [REDIRECT], "client_type": "confidential", **fields}
        _, data = c.call("POST", "/auth/v1/admin/oauth/clients", body, headers=bearer(args.key), expect=(201,))
        return json.loads(data)

    clients = {}
    for name, scope in (("app", SCOPE), ("plain", PLAIN_SCOPE), ("machine", None)):
        grants = ["client_credentials"] if scope is None else ["authorization_code", "refresh_token"]
        registered = register(grant_types=grants, **({"scope": scope} if scope else {}))
        clients[name] = {"id": registered["client_id"], "secret": registered["client_secret"], "scope": scope}
        with open(f"{args.out}/{name}.auth", "w") as out:
            out.write(basic(registered["client_id"], registered["client_secret"]))
    state = {"email": emails[0], "emails": emails, "clients": clients, "client_id": clients["app"]["id"]}
    with open(f"{args.out}/setup.json", "w") as out:
        json.dump(state, out)
    with open(f"{args.out}/cc.body", "w") as out:
        out.write("grant_type=client_credentials\n")


_users = itertools.count()


def code(base, state, name="app"):
    """An approved code of client `name` and the form body of its exchange (fresh PKCE verifier), approved by this
    thread's user. The first authorization of each user asks it; the consent it leaves lets every later one through
    at once. A user per thread: approvals at once by one user for one client collide on PostgreSQL (each rewrites
    the consent row: delete, then insert), and one of them answers 500."""
    c = client(base)
    if getattr(_local, "access", None) is None:
        _local.access = sign_in(base, state["emails"][next(_users) % len(state["emails"])])["access_token"]
    access_token = _local.access
    registered = state["clients"][name]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = urllib.parse.urlencode({
        "response_type": "code", "client_id": registered["id"], "redirect_uri": REDIRECT, "scope": registered["scope"],
        "state": secrets.token_urlsafe(8), "nonce": secrets.token_urlsafe(8), "code_challenge": challenge,
        "code_challenge_method": "S256"})
    response, _ = c.call("GET", "/auth/v1/oauth/authorize?" + query, expect=(302, 303))
    location = urllib.parse.urlsplit(response.getheader("location"))
    authorization = urllib.parse.parse_qs(location.query)["authorization_id"][0]
    _, data = c.call("GET", f"/auth/v1/oauth/authorizations/{authorization}", headers=bearer(access_token))
    answer = json.loads(data)
    if "redirect_url" not in answer:
        _, data = c.call("POST", f"/auth/v1/oauth/authorizations/{authorization}/consent", {"action": "approve"},
                         headers=bearer(access_token))
        answer = json.loads(data)
    redirect = urllib.parse.parse_qs(urllib.parse.urlsplit(answer["redirect_url"]).query)
    return urllib.parse.urlencode({"grant_type": "authorization_code", "code": redirect["code"][0],
                                   "redirect_uri": REDIRECT, "code_verifier": verifier})


def exchange(base, state, body, name="app"):
    registered = state["clients"][name]
    _, data = client(base).call(
        "POST", "/auth/v1/oauth/token", dict(urllib.parse.parse_qsl(body)), form=True,
        headers={"Authorization": basic(registered["id"], registered["secret"])})
    return json.loads(data)


def parallel(count, job):
    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(lambda _: job(), range(count)))


def chains(args):
    state = load(args.out)
    # One at a time: sign-ins at once to one account count as attempts in flight and back off (429).
    account = [sign_in(args.gatehouse, state["email"])["refresh_token"] for _ in range(args.count)]
    oauth, plain = (parallel(args.count, lambda: exchange(args.gatehouse, state, code(args.gatehouse, state, name),
                                                          name)["refresh_token"]) for name in ("app", "plain"))
    for name, tokens in (("account", account), ("oauth", oauth), ("plain", plain)):
        with open(f"{args.out}/{name}.tokens", "w") as out:
            out.write("\n".join(tokens) + "\n")


def codes(args):
    state = load(args.out)
    deadline = time.monotonic() + args.seconds

    def job():
        return code(args.gatehouse, state) if time.monotonic() < deadline else None

    started = time.monotonic()
    bodies = [body for body in parallel(args.count, job) if body]
    with open(f"{args.out}/codes.body", "w") as out:
        out.write("\n".join(bodies) + "\n")
    print(f"{len(bodies)} codes prepared in {time.monotonic() - started:.1f} s", file=sys.stderr)


def timed(tokens, check, rounds=5):
    """Median over `rounds` passes of the µs one verification takes."""
    per = []
    for _ in range(rounds):
        started = time.perf_counter()
        for token in tokens:
            check(token)
        per.append((time.perf_counter() - started) / len(tokens) * 1e6)
    return statistics.median(per)


def verify(args):
    import jwt
    from authlib.jose import JsonWebKey
    from authlib.jose import jwt as jose_jwt
    from authlib.oidc.core import CodeIDToken
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    state = load(args.out)
    c = Client(args.gatehouse)
    _, data = c.call("GET", "/auth/v1/.well-known/openid-configuration")
    config = json.loads(data)
    _, data = c.call("GET", urllib.parse.urlsplit(config["jwks_uri"]).path)
    jwks = json.loads(data)
    access = sign_in(args.gatehouse, state["email"])
    id_tokens = parallel(args.count, lambda: exchange(args.gatehouse, state, code(args.gatehouse, state))["id_token"])
    # The account's own access tokens: one rotation chain, each answer's token a new one.
    account, refresh = [], access["refresh_token"]
    for _ in range(args.count):
        _, data = c.call("POST", "/auth/v1/token?grant_type=refresh_token", {"refresh_token": refresh})
        answer = json.loads(data)
        account.append(answer["access_token"])
        refresh = answer["refresh_token"]
    header = jwt.get_unverified_header(id_tokens[0])
    account_header = jwt.get_unverified_header(account[0])
    keys = {key["kid"]: jwt.PyJWK(key) for key in jwks["keys"]}
    key_set = JsonWebKey.import_key_set(jwks)
    issuer, audience = config["issuer"], state["client_id"]

    def pyjwt_id(token):
        key = keys[jwt.get_unverified_header(token)["kid"]]
        jwt.decode(token, key, algorithms=[key.algorithm_name], audience=audience, issuer=issuer,
                   options={"require": ["exp", "iat", "sub"]})

    def pyjwt_access(token):
        key = keys[jwt.get_unverified_header(token)["kid"]]
        jwt.decode(token, key, algorithms=[key.algorithm_name], audience="authenticated", issuer=issuer,
                   options={"require": ["exp", "iat", "sub"]})

    def authlib_id(token):
        claims = jose_jwt.decode(token, key_set, claims_cls=CodeIDToken,
                                 claims_options={"iss": {"essential": True, "value": issuer}},
                                 claims_params={"client_id": audience})
        claims.validate()

    def authlib_access(token):
        claims = jose_jwt.decode(token, key_set, claims_options={
            "iss": {"essential": True, "value": issuer}, "aud": {"essential": True, "value": "authenticated"}})
        claims.validate()

    for check, tokens in ((pyjwt_id, id_tokens), (pyjwt_access, account), (authlib_id, id_tokens),
                          (authlib_access, account)):
        for token in tokens[:3]:
            check(token)  # fails loudly here rather than being timed
    def signature_only(tokens):
        """The ECDSA check alone (cryptography, OpenSSL), on inputs split and decoded beforehand: what every library
        pays at least."""
        prepared = []
        for token in tokens:
            head, body, signature = token.split(".")
            raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
            der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
            prepared.append((keys[jwt.get_unverified_header(token)["kid"]].key, der, f"{head}.{body}".encode()))
        return timed(prepared, lambda item: item[0].verify(item[1], item[2], ec.ECDSA(hashes.SHA256())))

    sizes = lambda tokens: statistics.median(len(t) for t in tokens)  # noqa: E731 - a one-line helper
    rows = [("id token (OAuth client, scope openid email profile)", header["alg"], sizes(id_tokens),
             timed(id_tokens, pyjwt_id), timed(id_tokens, authlib_id), signature_only(id_tokens)),
            ("account access token", account_header["alg"], sizes(account), timed(account, pyjwt_access),
             timed(account, authlib_access), signature_only(account))]
    print(f"== {args.count} tokens of each, verified 5 times over; median µs per verification")
    print("| token | alg | bytes | PyJWT µs | authlib.jose µs | ECDSA check alone µs |")
    print("|---|---|---:|---:|---:|---:|")
    for name, alg, size, fast, full, alone in rows:
        print(f"| {name} | {alg} | {size:.0f} | {fast:.0f} | {full:.0f} | {alone:.0f} |")


def table(args):
    rows = []
    for line in open(args.results):
        fields = dict(part.split("=", 1) for part in line.split())
        rows.append(fields)
    base = {(r["store"], r["c"]): float(r["rps"]) for r in rows if r["grant"] == "account_refresh"}
    names = {"account_refresh": "account refresh (`/token?grant_type=refresh_token`)",
             "oauth_refresh": "OAuth refresh (rotating; scope openid email profile: an id token each)",
             "plain_refresh": "OAuth refresh (rotating; scope email: no id token)",
             "client_credentials": "client credentials",
             "code_exchange": "code exchange (id token under openid)"}
    print("| store | clients | request | requests/s | × account refresh | p50 ms | p95 ms | p99 ms | requests "
          "| non-200 |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        ratio = float(r["rps"]) / base[(r["store"], r["c"])] if (r["store"], r["c"]) in base else float("nan")
        print(f"| {r['store']} | {r['c']} | {names.get(r['grant'], r['grant'])} | {float(r['rps']):.0f} | "
              f"{ratio:.2f} | {r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} | {r['requests']} | "
              f"{int(r['non200']) + int(r['errors'])} |")


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("setup", "chains", "codes", "verify"):
        command = sub.add_parser(name)
        command.add_argument("--gatehouse", required=True)
        command.add_argument("--out", required=True)
        if name == "setup":
            command.add_argument("--key", required=True)
        else:
            command.add_argument("--count", type=int, required=True)
        if name == "codes":
            command.add_argument("--seconds", type=float, default=20)
    sub.add_parser("table").add_argument("results")
    args = parser.parse_args()
    {"setup": setup, "chains": chains, "codes": codes, "verify": verify, "table": table}[args.command](args)


if __name__ == "__main__":
    main()
