"""Apple's own App Store Server Library (app-store-server-library on PyPI) as a peer of Gatehouse's tests.

verify ROOT_DER JSON_FILE
    Verifies, with the library's SignedDataVerifier (online checks off, Production), the signed data the Swift
    fixtures made, given their test root; prints what it decoded as JSON, or exits 1 with the library's status.
chain OUT_DIR
    Makes a chain of its own (root; intermediate and leaf with Apple's markers) with `cryptography`: root.pem, and the
    leaf's key and the x5c for `sign`, in OUT_DIR.
bulk OUT_DIR APP_ACCOUNT_TOKEN COUNT
    COUNT DID_RENEW notifications with that chain, renewals of 16 subscriptions in turn, each newer than the one
    before it, one request body per line in OUT_DIR/notifications.jsonl (Benchmarks/app-store.sh).
fake-api RESPONSES_DIR PUBLIC_KEY_PEM ISSUER_ID KEY_ID BUNDLE_ID
    A local fake of the App Store Server API's Get All Subscription Statuses: checks each request's JWT as Apple
    documents it (ES256 with the key's id as `kid`, `typ` JWT, `iss`, `aud` appstoreconnect-v1, `bid`, at most an
    hour), then answers RESPONSES_DIR/<transactionId>.json (404 when there is none). Prints its port, then one line
    per request.
sign OUT_DIR APP_ACCOUNT_TOKEN
    Signs with that chain, with PyJWT as the library's tests do, a transaction and a SUBSCRIBED notification in the
    shape of the library's documentation and test resources: transaction.jws and notification.jws in OUT_DIR.
"""
import base64
import datetime
import json
import sys
import time
import uuid

import jwt
from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier, VerificationException
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

BUNDLE_ID = "com.example.gatehouse"
APP_APPLE_ID = 1234567890
BUSINESS = "com.example.gatehouse.business.monthly"


def verify(root_der_path, fixtures_path):
    with open(root_der_path, "rb") as f:
        root = f.read()
    with open(fixtures_path) as f:
        fixtures = json.load(f)
    verifier = SignedDataVerifier([root], False, Environment.PRODUCTION, BUNDLE_ID, APP_APPLE_ID)
    try:
        transaction = verifier.verify_and_decode_signed_transaction(fixtures["transaction"])
        renewal = verifier.verify_and_decode_renewal_info(fixtures["renewal"])
        notification = verifier.verify_and_decode_notification(fixtures["notification"])
    except VerificationException as e:
        print(f"refused: {e.status}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({
        "transactionId": transaction.transactionId,
        "originalTransactionId": transaction.originalTransactionId,
        "appAccountToken": transaction.appAccountToken,
        "productId": transaction.productId,
        "expiresDate": transaction.expiresDate,
        "renewalProductId": renewal.autoRenewProductId,
        "notificationType": notification.rawNotificationType,
        "notificationUUID": notification.notificationUUID,
    }))


def certificate(subject, issuer, key, issuer_key, ca, marker):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=not ca, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=ca, crl_sign=ca, encipher_only=False, decipher_only=False),
            critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False)
    )
    if marker:
        builder = builder.add_extension(
            x509.UnrecognizedExtension(x509.ObjectIdentifier(marker), b"\x05\x00"), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def chain(out_dir):
    root_key, intermediate_key, leaf_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    root = certificate("Peer Root", "Peer Root", root_key, root_key, True, None)
    intermediate = certificate("Peer WWDR", "Peer Root", intermediate_key, root_key, True, "1.2.840.113635.100.6.2.1")
    leaf = certificate("Peer Signing", "Peer WWDR", leaf_key, intermediate_key, False, "1.2.840.113635.100.6.11.1")
    x5c = [base64.b64encode(c.public_bytes(serialization.Encoding.DER)).decode() for c in (leaf, intermediate, root)]
    with open(f"{out_dir}/root.pem", "wb") as f:
        f.write(root.public_bytes(serialization.Encoding.PEM))
    with open(f"{out_dir}/leaf.key", "wb") as f:
        f.write(leaf_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    with open(f"{out_dir}/x5c.json", "w") as f:
        json.dump(x5c, f)


def sign(out_dir, token):
    with open(f"{out_dir}/leaf.key", "rb") as f:
        leaf_key = serialization.load_pem_private_key(f.read(), password=None)
    with open(f"{out_dir}/x5c.json") as f:
        x5c = json.load(f)
    now = int(time.time() * 1000)

    def signed(payload):
        return jwt.encode(payload, leaf_key, algorithm="ES256", headers={"x5c": x5c})

    transaction = {
        "originalTransactionId": "4000000000000001", "transactionId": "4000000000000002",
        "webOrderLineItemId": "4000000000000003", "bundleId": BUNDLE_ID, "productId": BUSINESS,
        "subscriptionGroupIdentifier": "21000001", "purchaseDate": now - 1000, "originalPurchaseDate": now - 1000,
        "expiresDate": now + 30 * 86400 * 1000, "quantity": 1, "type": "Auto-Renewable Subscription",
        "appAccountToken": token, "inAppOwnershipType": "PURCHASED", "signedDate": now,
        "environment": "Production", "transactionReason": "PURCHASE", "storefront": "USA", "storefrontId": "143441",
        "price": 10990, "currency": "USD", "appTransactionId": "71134", "offerPeriod": "P1Y",
    }
    renewal = {
        "expirationIntent": None, "originalTransactionId": "4000000000000001", "autoRenewProductId": BUSINESS,
        "productId": BUSINESS, "autoRenewStatus": 1, "isInBillingRetryPeriod": False, "signedDate": now,
        "environment": "Production", "recentSubscriptionStartDate": now - 1000, "renewalDate": now + 30 * 86400 * 1000,
    }
    renewal = {k: v for k, v in renewal.items() if v is not None}
    notification = {
        "notificationType": "SUBSCRIBED", "subtype": "INITIAL_BUY", "notificationUUID": str(uuid.uuid4()),
        "data": {
            "environment": "Production", "appAppleId": APP_APPLE_ID, "bundleId": BUNDLE_ID, "bundleVersion": "1.2.3",
            "signedTransactionInfo": signed(transaction), "signedRenewalInfo": signed(renewal), "status": 1,
        },
        "version": "2.0", "signedDate": now,
    }
    with open(f"{out_dir}/transaction.jws", "w") as f:
        f.write(signed(transaction))
    with open(f"{out_dir}/notification.jws", "w") as f:
        f.write(signed(notification))


def bulk(out_dir, token, count):
    with open(f"{out_dir}/leaf.key", "rb") as f:
        leaf_key = serialization.load_pem_private_key(f.read(), password=None)
    with open(f"{out_dir}/x5c.json") as f:
        x5c = json.load(f)
    now = int(time.time() * 1000)
    with open(f"{out_dir}/notifications.jsonl", "w") as out:
        for n in range(int(count)):
            signed_date = now - int(count) + n
            transaction = {
                "originalTransactionId": f"6{n % 16:015d}", "transactionId": f"7{n:015d}", "bundleId": BUNDLE_ID,
                "productId": BUSINESS, "purchaseDate": now, "originalPurchaseDate": now,
                "expiresDate": now + 30 * 86400 * 1000, "quantity": 1, "type": "Auto-Renewable Subscription",
                "appAccountToken": token, "inAppOwnershipType": "PURCHASED", "signedDate": signed_date,
                "environment": "Production", "transactionReason": "RENEWAL",
            }
            notification = {
                "notificationType": "DID_RENEW", "notificationUUID": str(uuid.uuid4()),
                "data": {
                    "environment": "Production", "appAppleId": APP_APPLE_ID, "bundleId": BUNDLE_ID,
                    "signedTransactionInfo": jwt.encode(transaction, leaf_key, algorithm="ES256", headers={"x5c": x5c}),
                    "status": 1,
                },
                "version": "2.0", "signedDate": signed_date,
            }
            signed = jwt.encode(notification, leaf_key, algorithm="ES256", headers={"x5c": x5c})
            out.write(json.dumps({"signedPayload": signed}) + "\n")


def fake_api(responses, public_key_path, issuer, key_id, bundle_id):
    import http.server
    import os

    with open(public_key_path, "rb") as f:
        public_key = serialization.load_pem_public_key(f.read())

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            prefix = "/inApps/v1/subscriptions/"
            authorization = self.headers.get("Authorization", "")
            try:
                token = authorization.removeprefix("Bearer ")
                header = jwt.get_unverified_header(token)
                claims = jwt.decode(token, public_key, algorithms=["ES256"], audience="appstoreconnect-v1",
                                    issuer=issuer, options={"require": ["iat", "exp", "iss", "aud", "bid"]})
                if header.get("kid") != key_id or header.get("typ") != "JWT":
                    raise ValueError("kid or typ")
                if claims["bid"] != bundle_id or claims["exp"] - claims["iat"] > 3600:
                    raise ValueError("bid or lifetime")
            except Exception as e:
                print(f"refused {self.path}: {e}", flush=True)
                return self.answer(401, {"errorCode": 4010000, "errorMessage": "Unauthenticated"})
            if not self.path.startswith(prefix):
                return self.answer(404, {"errorCode": 4040000})
            path = os.path.join(responses, self.path[len(prefix):] + ".json")
            if not os.path.exists(path):
                print(f"unknown {self.path}", flush=True)
                return self.answer(404, {"errorCode": 4040010, "errorMessage": "Transaction id not found."})
            print(f"answered {self.path}", flush=True)
            with open(path) as f:
                self.answer(200, json.load(f))

    # A test runner may start children with SIGTERM ignored: stop on SIGTERM, and when the test closes stdin.
    import signal
    import threading
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    if sys.argv[1] == "verify":
        verify(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "bulk":
        bulk(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "fake-api":
        fake_api(*sys.argv[2:7])
    elif sys.argv[1] == "chain":
        chain(sys.argv[2])
    else:
        sign(sys.argv[2], sys.argv[3])
