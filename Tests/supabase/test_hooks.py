"""Auth hooks (docs/hooks.md) as an app on Supabase's official Python client sees them: a before user created hook,
a small endpoint in this process that checks each call's Standard Webhooks signature with the PyPI `standardwebhooks`
package, refuses a sign-up, and the client raises the hook's status and message.
"""

import base64
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import PASSWORD, new_email
from standardwebhooks.webhooks import Webhook
from supabase_auth.errors import AuthApiError


@pytest.fixture
def hook():
    """A before user created endpoint on a loopback port: refuses every sign-up with 403 when its signature verifies
    (401 otherwise, which fails the sign-up closed); `calls` holds each input and whether it verified."""
    secret = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    calls = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            try:
                Webhook(secret).verify(body, {k.lower(): v for k, v in self.headers.items()})
                verified = True
            except Exception:
                verified = False
            calls.append((verified, json.loads(body)))
            answer = {"error": {"http_code": 403, "message": "Sign-ups are closed this week"}}
            data = json.dumps(answer).encode()
            self.send_response(200 if verified else 401)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    endpoint = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=endpoint.serve_forever, daemon=True).start()
    try:
        yield {"url": f"http://127.0.0.1:{endpoint.server_address[1]}/before", "secret": secret, "calls": calls}
    finally:
        endpoint.shutdown()


def test_a_sign_up_refused_by_the_before_user_created_hook(servers, hook):
    server = servers.start(
        "--hook-before-user-created-uri", hook["url"], "--hook-before-user-created-secrets", "v1," + hook["secret"]
    )
    address = new_email()
    client = server.client()

    with pytest.raises(AuthApiError) as refused:
        client.sign_up({"email": address, "password": PASSWORD})
    assert refused.value.status == 403
    assert refused.value.message == "Sign-ups are closed this week"
    assert client.get_session() is None

    verified, payload = hook["calls"][-1]
    assert verified, "the hook's call did not verify with standardwebhooks"
    assert payload["user"]["email"] == address
    assert payload["metadata"]["name"] == "before-user-created"
