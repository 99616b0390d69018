"""A real OpenID Connect / OAuth 2.0 provider for tests, built on Authlib's server side with Flask.

    python3 Tests/oidc/provider.py --port P [--issuer URL]

It prints "oidc provider ready at <issuer>" once it listens on 127.0.0.1:P and stops on SIGTERM (or Ctrl-C).
Everything lives in memory and is gone when it stops.

What it serves (all paths under the issuer, which defaults to http://127.0.0.1:P):

- GET  /.well-known/openid-configuration   discovery (validated by Authlib's OpenIDProviderMetadata)
- GET  /jwks                               the public half of the current signing key, and only that one
- GET  /authorize                          a tiny sign-in page: email, sub, email_verified, name; "approve" / "deny".
                                           The form posts back to the very URL it is shown at, so the client's
                                           query (client_id, redirect_uri, state, nonce, code_challenge...) rides
                                           along; a test without a browser posts the fields to that URL.
- POST /authorize                          approves as the user the fields describe (decision=deny refuses:
                                           error=access_denied goes back to the client)
- POST /token                              the authorization code grant (client_secret_basic or client_secret_post,
                                           PKCE S256 or plain when the authorization request had a code_challenge);
                                           an id_token (RS256, with kid) when the scope has `openid`
- GET  /userinfo                           OIDC claims of the bearer's user (scope `openid` required)
- GET  /user                               the same user as GitHub's API shows one: id (an integer), login, name, email

and, for the test that drives it:

- POST /admin/clients                      registers a client: {"client_id", "client_secret", "redirect_uris": [...],
                                           "token_endpoint_auth_method": "client_secret_basic"|"client_secret_post"}
- POST /admin/rotate                       a new RSA key (new kid) becomes the signing key and the only one published;
                                           with {"publish": false} it signs but the JWKS keeps the old key: id tokens
                                           no relying party can verify
- GET  /admin/last-token-request           how the last token request went: client_id, auth_method (as Authlib
                                           authenticated the client, null when it did not), code_verifier (sent?),
                                           code_challenge_method (of the code presented, null without PKCE),
                                           status and error
"""

import argparse
import html
import os
import signal
import threading
import time
import zlib

# Plain HTTP is the point of a loopback test provider; Authlib otherwise insists on TLS for hosts but loopback.
os.environ.setdefault("AUTHLIB_INSECURE_TRANSPORT", "1")

from authlib.integrations.flask_oauth2 import AuthorizationServer, ResourceProtector, current_token  # noqa: E402
from authlib.jose import JsonWebKey, KeySet  # noqa: E402
from authlib.oauth2 import OAuth2Error  # noqa: E402
from authlib.oauth2.rfc6749 import ClientMixin, TokenMixin, grants  # noqa: E402
from authlib.oauth2.rfc6750 import BearerTokenValidator  # noqa: E402
from authlib.oauth2.rfc7636 import CodeChallenge  # noqa: E402
from authlib.oidc.core import UserInfo, UserInfoEndpoint  # noqa: E402
from authlib.oidc.core.grants import OpenIDCode  # noqa: E402
from authlib.oidc.core.models import AuthorizationCodeMixin  # noqa: E402
from authlib.oidc.discovery import OpenIDProviderMetadata  # noqa: E402
from flask import Flask, g, jsonify, request  # noqa: E402
from werkzeug.serving import make_server  # noqa: E402

AUTH_METHODS = ["client_secret_basic", "client_secret_post"]


# --- what is stored ---------------------------------------------------------------------------------------------


class User:
    """A user as the sign-in form described them."""

    def __init__(self, sub, email, email_verified, name):
        self.sub = sub
        self.email = email
        self.email_verified = email_verified
        self.name = name

    def github_id(self):
        """GitHub's numeric user id: the sub itself when it is a number, else a stable number made from it."""
        return int(self.sub) if self.sub.isdigit() else zlib.crc32(self.sub.encode())


class Client(ClientMixin):
    """A registered relying party: confidential, authorization code grant only, exact redirect URIs."""

    def __init__(self, client_id, client_secret, redirect_uris, token_endpoint_auth_method):
        self.client_id = client_id
        self.client_secret = client_secret
        self.redirect_uris = list(redirect_uris)
        self.token_endpoint_auth_method = token_endpoint_auth_method
        self.client_metadata = {}  # nothing signed or encrypted beyond the id token
        self.id_token_signed_response_alg = "RS256"

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return self.redirect_uris[0] if self.redirect_uris else None

    def get_allowed_scope(self, scope):
        return scope

    def check_redirect_uri(self, redirect_uri):
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret):
        return client_secret == self.client_secret

    def check_endpoint_auth_method(self, method, endpoint):
        return endpoint != "token" or method == self.token_endpoint_auth_method

    def check_response_type(self, response_type):
        return response_type == "code"

    def check_grant_type(self, grant_type):
        return grant_type == "authorization_code"


class AuthorizationCode(AuthorizationCodeMixin):
    """An issued, not yet redeemed authorization code and what it was issued for."""

    def __init__(self, code, client_id, redirect_uri, scope, user, nonce, code_challenge, code_challenge_method):
        self.code = code
        self.client_id = client_id
        self.redirect_uri = redirect_uri
        self.scope = scope
        self.user = user
        self.nonce = nonce
        self.code_challenge = code_challenge
        self.code_challenge_method = code_challenge_method
        self.auth_time = int(time.time())

    def get_redirect_uri(self):
        return self.redirect_uri

    def get_scope(self):
        return self.scope

    def get_nonce(self):
        return self.nonce

    def get_auth_time(self):
        return self.auth_time

    def get_acr(self):
        return None

    def get_amr(self):
        return None


class Token(TokenMixin):
    """An issued access token."""

    def __init__(self, value, client, user, scope, expires_in):
        self.access_token = value
        self.client = client
        self.user = user
        self.scope = scope
        self.expires_in = expires_in
        self.issued_at = time.time()

    def check_client(self, client):
        return client.get_client_id() == self.client.get_client_id()

    def get_scope(self):
        return self.scope

    def get_expires_in(self):
        return self.expires_in

    def is_expired(self):
        return time.time() >= self.issued_at + self.expires_in

    def is_revoked(self):
        return False

    def get_user(self):
        return self.user

    def get_client(self):
        return self.client


class SigningKeys:
    """The RSA signing key: one at a time, replaced by rotate(); the JWKS publishes the current one only, unless a
    rotation was told not to publish its key (then id tokens are signed by a key nobody can verify them with)."""

    def __init__(self):
        self.current = self.published = None
        self.rotate()

    def rotate(self, publish=True):
        key = JsonWebKey.generate_key("RSA", 2048, is_private=True)
        self.current = JsonWebKey.import_key(key.as_dict(is_private=True, kid=key.thumbprint(), use="sig", alg="RS256"))
        if publish:
            self.published = self.current
        return self.kid

    @property
    def kid(self):
        return self.current.kid

    def public_set(self):
        return KeySet([self.published]).as_dict(is_private=False)


class Store:
    """Everything the provider knows, in memory."""

    def __init__(self, issuer):
        self.issuer = issuer
        self.keys = SigningKeys()
        self.clients = {}
        self.codes = {}
        self.tokens = {}
        self.last_token_request = None
        self.lock = threading.Lock()


# --- Authlib's grant and its extensions ---------------------------------------------------------------------------


def code_grant(store):
    """Authlib's authorization code grant over the store; it notes how the token request authenticated the client
    and which PKCE method the redeemed code carried, for /admin/last-token-request."""

    class CodeGrant(grants.AuthorizationCodeGrant):
        TOKEN_ENDPOINT_AUTH_METHODS = AUTH_METHODS

        def save_authorization_code(self, code, req):
            data = req.payload.data
            store.codes[code] = AuthorizationCode(
                code,
                req.client.get_client_id(),
                req.payload.redirect_uri,
                req.payload.scope,
                req.user,
                data.get("nonce"),
                data.get("code_challenge"),
                data.get("code_challenge_method"),
            )

        def query_authorization_code(self, code, client):
            found = store.codes.get(code)
            if not found or found.client_id != client.get_client_id():
                return None
            g.code_challenge_method = (found.code_challenge_method or "plain") if found.code_challenge else None
            return found

        def delete_authorization_code(self, authorization_code):
            store.codes.pop(authorization_code.code, None)

        def authenticate_user(self, authorization_code):
            return authorization_code.user

        def authenticate_token_endpoint_client(self):
            client = super().authenticate_token_endpoint_client()
            g.auth_method = self.request.auth_method
            return client

    return CodeGrant


def user_claims(user, scope):
    """The OIDC claims of `user` that `scope` grants: sub always, email and email_verified with `email`, name with
    `profile`."""
    return UserInfo(sub=user.sub, email=user.email, email_verified=user.email_verified, name=user.name).filter(scope)


def openid_code(store):
    """Authlib's OpenID Connect extension of the code grant: signs the id token with the current key."""

    class Extension(OpenIDCode):
        def exists_nonce(self, nonce, req):
            # Under the lock: other requests' threads add and remove codes while this one looks.
            with store.lock:
                codes = list(store.codes.values())
            return any(code.nonce == nonce and code.client_id == req.payload.client_id for code in codes)

        def get_jwt_config(self, grant, client):
            return {"key": store.keys.current, "alg": "RS256", "iss": store.issuer, "exp": 3600, "kid": store.keys.kid}

        def generate_user_info(self, user, scope):
            return user_claims(user, scope)

        def get_audiences(self, req):
            return req.client.get_client_id()  # a single audience: aud is the client id itself

    return Extension(require_nonce=False)


def userinfo_endpoint(store):
    """Authlib's UserInfo endpoint, answering the bearer's claims as JSON."""

    class Endpoint(UserInfoEndpoint):
        def get_issuer(self):
            return store.issuer

        def generate_user_info(self, user, scope):
            return user_claims(user, scope)

    return Endpoint


def bearer_validator(store):
    """Finds an access token presented as a Bearer."""

    class Validator(BearerTokenValidator):
        def authenticate_token(self, token_string):
            return store.tokens.get(token_string)

    return Validator()


# --- the app ----------------------------------------------------------------------------------------------------


def discovery(issuer):
    """The discovery document, checked by Authlib's own validation of provider metadata."""
    metadata = OpenIDProviderMetadata(
        issuer=issuer,
        authorization_endpoint=f"{issuer}/authorize",
        token_endpoint=f"{issuer}/token",
        userinfo_endpoint=f"{issuer}/userinfo",
        jwks_uri=f"{issuer}/jwks",
        response_types_supported=["code"],
        grant_types_supported=["authorization_code"],
        subject_types_supported=["public"],
        id_token_signing_alg_values_supported=["RS256"],
        code_challenge_methods_supported=["S256", "plain"],
        token_endpoint_auth_methods_supported=AUTH_METHODS,
        scopes_supported=["openid", "email", "profile"],
        claims_supported=["sub", "iss", "aud", "exp", "iat", "nonce", "email", "email_verified", "name"],
    )
    metadata.validate()
    return dict(metadata)


SIGN_IN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in to the test provider</title></head>
<body>
<h1>Sign in to the test provider</h1>
<p>{client} asks who you are.</p>
<form method="post" action="{action}">
<p><label>Email <input type="email" id="email" name="email" autocomplete="off"></label></p>
<p><label>Subject <input type="text" id="sub" name="sub" autocomplete="off"></label></p>
<p><label><input type="checkbox" id="email_verified" name="email_verified" checked> Email verified</label></p>
<p><label>Name <input type="text" id="name" name="name" autocomplete="off"></label></p>
<p><button type="submit" id="approve" name="decision" value="approve">Approve</button>
<button type="submit" id="deny" name="decision" value="deny">Deny</button></p>
</form>
</body></html>
"""


def form_user():
    """The user the posted sign-in form describes; a missing sub is made from the email."""
    form = request.form
    email = form.get("email", "").strip()
    sub = form.get("sub", "").strip() or f"sub-{zlib.crc32(email.encode())}"
    verified = form.get("email_verified", "").lower() in ("on", "true", "1", "yes")
    return User(sub, email, verified, form.get("name", "").strip())


def create_app(issuer):
    """The provider's Flask app for `issuer` (no trailing slash)."""
    store = Store(issuer)
    app = Flask(__name__)
    app.config["OAUTH2_TOKEN_EXPIRES_IN"] = {"authorization_code": 3600}

    def save_token(token, req):
        store.tokens[token["access_token"]] = Token(
            token["access_token"], req.client, req.user, token.get("scope", ""), token["expires_in"]
        )

    server = AuthorizationServer(app, query_client=store.clients.get, save_token=save_token)
    server.register_grant(code_grant(store), [CodeChallenge(required=True), openid_code(store)])
    protector = ResourceProtector()
    protector.register_token_validator(bearer_validator(store))
    server.register_endpoint(userinfo_endpoint(store)(resource_protector=protector))

    @app.get("/.well-known/openid-configuration")
    def openid_configuration():
        return jsonify(discovery(issuer))

    @app.get("/jwks")
    def jwks():
        return jsonify(store.keys.public_set())

    @app.get("/authorize")
    def authorize_page():
        try:
            grant = server.get_consent_grant(end_user=None)
        except OAuth2Error as error:
            return server.handle_error_response(None, error)
        page = SIGN_IN_PAGE.format(
            client=html.escape(grant.client.get_client_id()), action=html.escape(request.full_path, quote=True)
        )
        return page, 200, {"Content-Type": "text/html; charset=utf-8"}

    @app.post("/authorize")
    def authorize_decision():
        approved = request.form.get("decision", "approve") != "deny"
        user = form_user() if approved else None
        try:
            grant = server.get_consent_grant(end_user=user)
        except OAuth2Error as error:
            return server.handle_error_response(None, error)
        return server.create_authorization_response(grant=grant, grant_user=user)

    @app.post("/token")
    def token():
        response = server.create_token_response()
        body = response.get_json(silent=True) or {}
        store.last_token_request = {
            "client_id": request.authorization.username if request.authorization else request.form.get("client_id"),
            "auth_method": g.get("auth_method"),
            "code_verifier": bool(request.form.get("code_verifier")),
            "code_challenge_method": g.get("code_challenge_method"),
            "status": response.status_code,
            "error": body.get("error"),
        }
        return response

    @app.route("/userinfo", methods=["GET", "POST"])
    def userinfo():
        return server.create_endpoint_response("userinfo")

    @app.get("/user")
    @protector()
    def github_user():
        user = current_token.get_user()
        login = user.email.split("@")[0] if user.email else user.sub
        return jsonify({"id": user.github_id(), "login": login, "name": user.name or None, "email": user.email or None})

    @app.post("/admin/clients")
    def register_client():
        data = request.get_json(force=True)
        method = data.get("token_endpoint_auth_method", "client_secret_basic")
        if method not in AUTH_METHODS or not data.get("client_id") or not data.get("redirect_uris"):
            return jsonify({"error": "invalid_client_metadata"}), 400
        client = Client(data["client_id"], data.get("client_secret", ""), data["redirect_uris"], method)
        store.clients[client.client_id] = client
        return jsonify({"client_id": client.client_id, "token_endpoint_auth_method": method}), 201

    @app.post("/admin/rotate")
    def rotate():
        publish = (request.get_json(silent=True) or {}).get("publish", True)
        with store.lock:
            return jsonify({"kid": store.keys.rotate(publish=bool(publish))})

    @app.get("/admin/last-token-request")
    def last_token_request():
        return jsonify(store.last_token_request)

    return app


def main():
    parser = argparse.ArgumentParser(description="An OpenID Connect / OAuth 2.0 provider for tests (Authlib, Flask).")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--issuer", help="the issuer URL (default http://127.0.0.1:PORT)")
    arguments = parser.parse_args()
    issuer = (arguments.issuer or f"http://127.0.0.1:{arguments.port}").rstrip("/")

    http = make_server("127.0.0.1", arguments.port, create_app(issuer), threaded=True)
    # serve_forever runs on a thread; the main thread waits for SIGTERM or Ctrl-C and shuts it down.
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    serving = threading.Thread(target=http.serve_forever, daemon=True)
    serving.start()
    print(f"oidc provider ready at {issuer}", flush=True)
    try:
        while not stopping.wait(3600):
            pass
    except KeyboardInterrupt:
        pass
    http.shutdown()
    http.server_close()


if __name__ == "__main__":
    main()
