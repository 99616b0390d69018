"""A self-check of idp.py against pysaml2's own service provider; not run by CI.

Usage: selftest.py

Starts idp.py, registers a pysaml2 SP (with an encryption certificate) configured from the IdP's metadata, then for
each mode sends an AuthnRequest over HTTP-Redirect, takes the response as JSON and has the SP parse it (signatures
checked by xmlsec1). Prints, for each mode, whether pysaml2's SP accepted it and which NameID it read, and whether
that is what we expect. Exits 1 if a valid mode is refused, or an attack that pysaml2 should refuse is accepted.
"""

import base64
import json
import logging
import os
import subprocess
import sys
import tempfile
import urllib.request

from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT
from saml2.client import Saml2Client
from saml2.config import SPConfig
from saml2.metadata import create_metadata_string

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from idp import MODES, make_key_and_certificate  # noqa: E402

SP_ID = "https://sp.acme.example/sp"
ACS = "https://sp.acme.example/acs"
VALID = {"signed-assertion", "signed-response", "signed-both", "encrypted-assertion"}
# Attacks pysaml2 may legitimately not catch; reported, not failed.
TOLERATED = {"sha1", "wrong-issuer", "comment-injection"}


def http(url, data=None, headers=None):
    request = urllib.request.Request(url, data=data, headers=headers or {})
    with urllib.request.urlopen(request) as response:
        return response.status, response.read()


def main():
    logging.disable(logging.CRITICAL)  # pysaml2 logs every refusal at length
    idp = subprocess.Popen([sys.executable, os.path.join(HERE, "idp.py")], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    port = int(idp.stdout.readline().split()[1])
    base = f"http://127.0.0.1:{port}"
    folder = tempfile.mkdtemp(prefix="saml-sp-")
    key_file, cert_file = make_key_and_certificate(folder)
    md_file = os.path.join(folder, "idp.xml")
    with open(md_file, "wb") as f:
        f.write(http(f"{base}/metadata")[1])
    config = SPConfig()
    config.load({
        "entityid": SP_ID,
        "xmlsec_binary": "/usr/bin/xmlsec1",
        "key_file": key_file, "cert_file": cert_file,
        "encryption_keypairs": [{"key_file": key_file, "cert_file": cert_file}],
        "metadata": {"local": [md_file]},
        "service": {"sp": {
            "endpoints": {"assertion_consumer_service": [(ACS, BINDING_HTTP_POST)]},
            "allow_unsolicited": True,
            "authn_requests_signed": False,
            "want_response_signed": False,
            "want_assertions_signed": False,
            "want_assertions_or_response_signed": True,
        }},
    })
    client = Saml2Client(config)
    assert http(f"{base}/sp", create_metadata_string(None, config=config, valid=None))[0] == 204
    idp_id = f"{base}/metadata"

    def attempt(mode, unsolicited=False):
        http(f"{base}/next", json.dumps({"mode": mode, "name_id": "user@acme.example",
                                         "attributes": {"email": ["user@acme.example"], "name": ["User"]}}).encode(),
             {"Content-Type": "application/json"})
        if unsolicited:
            url, outstanding = f"{base}/sso/initiate?sp={SP_ID}&RelayState=rs", {}
        else:
            request_id, info = client.prepare_for_authenticate(entityid=idp_id, relay_state="rs",
                                                               binding=BINDING_HTTP_REDIRECT)
            url, outstanding = dict(info["headers"])["Location"], {request_id: "/"}
        answer = json.loads(http(url, headers={"Accept": "application/json"})[1])
        assert answer["acs_url"] == ACS and answer["RelayState"] == "rs", answer
        try:
            parsed = client.parse_authn_request_response(answer["SAMLResponse"], BINDING_HTTP_POST, outstanding)
        except Exception as e:  # pysaml2 raises a variety of errors for refused responses
            return False, f"{type(e).__name__}: {str(e).splitlines()[0][:90] if str(e) else ''}", answer
        if parsed is None:
            return False, "None", answer
        attributes = {attribute.name: [value.text for value in attribute.attribute_value]
                      for statement in parsed.assertion.attribute_statement for attribute in statement.attribute}
        return True, f"{parsed.name_id.text} {attributes}", answer

    failures = 0
    for mode in MODES + ["unsolicited"]:
        accepted, detail, answer = attempt("signed-assertion" if mode == "unsolicited" else mode,
                                           unsolicited=mode == "unsolicited")
        expected = mode in VALID or mode == "unsolicited"
        if accepted == expected:
            verdict = "ok"
        elif mode in TOLERATED or mode.startswith("xsw"):
            verdict = "pysaml2 accepts (tolerated)"
        else:
            verdict = "FAIL"
            failures += 1
        print(f"{mode:40} {'accepted' if accepted else 'refused':9} {verdict:28} {detail}")
        if os.environ.get("SAML_DUMP") == mode:
            print(base64.b64decode(answer["SAMLResponse"]).decode())
    html = http(f"{base}/sso/initiate?sp={SP_ID}&RelayState=a%22b")[1].decode()
    assert f'action="{ACS}"' in html and 'name="SAMLResponse"' in html and 'value="a&quot;b"' in html, html
    print("HTML form: ok")
    idp.stdin.close()
    idp.wait(timeout=10)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
