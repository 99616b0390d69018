"""Id tokens for Benchmarks/id-token.sh, signed as Google signs them (ES256 here; Google uses RS256), by PyJWT and
cryptography (pinned in scripts/requirements-test.txt).

    python3 Benchmarks/id-token.py keys DIR            writes DIR/key.pem and DIR/jwks/certs (the published JWKS)
    python3 Benchmarks/id-token.py mint DIR FILE FIRST COUNT SUBJECTS AUDIENCE
        writes FILE: COUNT request bodies of the id_token grant, one per line, each a token of its own for subject
        bench-(FIRST + i) % SUBJECTS, issued by https://accounts.google.com for AUDIENCE, with a verified address.
"""
import base64
import json
import os
import sys
import time

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec


def b64(number):
    return base64.urlsafe_b64encode(number.to_bytes(32, "big")).rstrip(b"=").decode()


def keys(folder):
    key = ec.generate_private_key(ec.SECP256R1())
    with open(os.path.join(folder, "key.pem"), "wb") as out:
        out.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()))
    numbers = key.public_key().public_numbers()
    os.makedirs(os.path.join(folder, "jwks"), exist_ok=True)
    with open(os.path.join(folder, "jwks", "certs"), "w") as out:
        json.dump({"keys": [{"kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": "bench",
                             "x": b64(numbers.x), "y": b64(numbers.y)}]}, out)


def mint(folder, path, first, count, subjects, audience):
    with open(os.path.join(folder, "key.pem"), "rb") as source:
        key = serialization.load_pem_private_key(source.read(), None)
    now = int(time.time())
    with open(path, "w") as out:
        for i in range(first, first + count):
            subject = (i % subjects)
            claims = {"iss": "https://accounts.google.com", "aud": audience, "sub": f"bench-{subject}",
                      "email": f"bench-{subject}@example.com", "email_verified": True, "iat": now,
                      "exp": now + 3000, "jti": str(i)}
            token = jwt.encode(claims, key, algorithm="ES256", headers={"kid": "bench"})
            out.write(json.dumps({"provider": "google", "id_token": token}) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "keys":
        keys(sys.argv[2])
    else:
        mint(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7])
