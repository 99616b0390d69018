"""`gatehouse users import`: a Supabase export (auth.users as `COPY ... WITH CSV HEADER` writes it, with real bcrypt
and argon2id hashes made by Python's `bcrypt` and `argon2-cffi`) and a Firebase export (Firebase's published scrypt
example), imported beside the running server and signed in to with Supabase's official client.
"""

import csv
import io
import json
import os
import subprocess
import uuid

import argon2
import bcrypt
import pytest
from conftest import WAIT
from supabase_auth.errors import AuthApiError

# github.com/firebase/scrypt's README: the project's parameters and one exported user's salt and hash.
FIREBASE = {
    "hash_key": "jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==",
    "salt_separator": "Bw==",
    "salt": "42xEC+ixf3L2lw==",
    "hash": "lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==",
    "password": "user1password",
}
COLUMNS = [
    "id", "email", "encrypted_password", "email_confirmed_at", "created_at", "updated_at", "last_sign_in_at",
    "raw_app_meta_data", "raw_user_meta_data", "deleted_at", "is_anonymous",
]


def run_import(server, path, *flags):
    command = [server.binary, "users", "import", path, *flags, "--data-dir", server.data_dir]
    return subprocess.run(command, capture_output=True, text=True, timeout=WAIT * 4)


def write(server, name, text):
    path = os.path.join(server.work, name)
    with open(path, "w") as file:
        file.write(text)
    return path


def supabase_csv(rows):
    """auth.users as PostgreSQL's COPY writes it: a header, NULL as an empty unquoted field."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow(["" if row.get(name) is None else row[name] for name in COLUMNS])
    return out.getvalue()


def signed_in(server, email, password):
    return server.client().sign_in_with_password({"email": email, "password": password})


def test_a_supabase_export_signs_in_with_its_old_passwords_and_keeps_ids(server):
    ada, grace = str(uuid.uuid4()), str(uuid.uuid4())
    rows = [
        {
            "id": ada, "email": "ada@example.com",
            "encrypted_password": bcrypt.hashpw(b"bcrypt passphrase 1", bcrypt.gensalt(rounds=10)).decode(),
            "email_confirmed_at": "2024-01-02 03:04:05.123456+00", "created_at": "2024-01-01 00:00:00+00",
            "raw_app_meta_data": json.dumps({"provider": "email", "providers": ["email"], "plan": "pro"}),
            "raw_user_meta_data": json.dumps({"full_name": "Ada Lovelace"}), "is_anonymous": "f",
        },
        {
            "id": grace, "email": "grace@example.com",
            "encrypted_password": argon2.PasswordHasher().hash("argon passphrase 2"),
            "email_confirmed_at": "2024-01-02 03:04:05+00", "created_at": "2024-01-01 00:00:00+00",
            "raw_app_meta_data": "{}", "raw_user_meta_data": "{}", "is_anonymous": "f",
        },
    ]
    path = write(server, "users.csv", supabase_csv(rows))

    dry = run_import(server, path, "--from", "supabase", "--dry-run")
    assert dry.returncode == 0 and dry.stdout.strip() == "would import 2 users; 0 already here"
    with pytest.raises(AuthApiError):
        signed_in(server, "ada@example.com", "bcrypt passphrase 1")

    done = run_import(server, path, "--from", "supabase")
    assert done.returncode == 0 and done.stdout.strip() == "imported 2 users; 0 already here", done.stderr

    session = signed_in(server, "ada@example.com", "bcrypt passphrase 1")
    assert session.user.id == ada
    assert session.user.user_metadata == {"full_name": "Ada Lovelace"}
    assert session.user.app_metadata["plan"] == "pro"
    assert signed_in(server, "grace@example.com", "argon passphrase 2").user.id == grace
    # Rehashed at that sign-in: the old password still works, and a wrong one does not.
    assert signed_in(server, "grace@example.com", "argon passphrase 2").user.id == grace
    with pytest.raises(AuthApiError) as wrong:
        signed_in(server, "grace@example.com", "argon passphrase 3")
    assert (wrong.value.code, wrong.value.status) == ("invalid_credentials", 400)

    again = run_import(server, path, "--from", "supabase")
    assert again.returncode == 0 and again.stdout.strip() == "imported 0 users; 2 already here"


def test_a_firebase_export_signs_in_with_firebases_published_example(server):
    export = {
        "users": [
            {
                "localId": "firebaseUser1", "email": "fire@example.com", "emailVerified": True,
                "passwordHash": FIREBASE["hash"], "salt": FIREBASE["salt"], "displayName": "Fire Base",
                "createdAt": "1609459200000", "customAttributes": json.dumps({"role": "admin"}),
                "providerUserInfo": [{"providerId": "password", "email": "fire@example.com"}],
            }
        ]
    }
    path = write(server, "firebase.json", json.dumps(export))

    without = run_import(server, path, "--from", "firebase")
    assert without.returncode == 1 and "line 1: has a password hash" in without.stderr

    done = run_import(
        server, path, "--from", "firebase", "--hash-key", FIREBASE["hash_key"],
        "--salt-separator", FIREBASE["salt_separator"], "--rounds", "8", "--mem-cost", "14",
    )
    assert done.returncode == 0 and done.stdout.strip() == "imported 1 user; 0 already here", done.stderr

    session = signed_in(server, "fire@example.com", FIREBASE["password"])
    assert session.user.user_metadata == {"full_name": "Fire Base"}
    assert session.user.app_metadata["firebase_uid"] == "firebaseUser1"
    assert session.user.app_metadata["role"] == "admin"
    uuid.UUID(session.user.id)  # a UUID derived from the localId


def test_bad_rows_are_refused_by_line_and_nothing_is_written(server):
    good = {
        "id": str(uuid.uuid4()), "email": "kept-out@example.com", "created_at": "2024-01-01 00:00:00+00",
        "raw_app_meta_data": "{}", "raw_user_meta_data": "{}",
    }
    rows = [
        good,
        {**good, "id": "not-a-uuid", "email": "second@example.com"},
        {**good, "id": str(uuid.uuid4()), "email": "third@example.com", "encrypted_password": "md5:5f4dcc3b"},
        {**good, "id": str(uuid.uuid4())},  # the same email as the first row
    ]
    path = write(server, "bad.csv", supabase_csv(rows))

    refused = run_import(server, path, "--from", "supabase")

    assert refused.returncode == 1
    assert refused.stdout.strip() == "nothing imported: 3 rows refused"
    lines = [line for line in refused.stderr.splitlines() if line.startswith("refused: ")]
    assert lines == [
        "refused: line 3: id is not a UUID",
        "refused: line 4: encrypted_password is not a bcrypt, argon2 or Firebase scrypt hash",
        "refused: line 5: its email is also on line 2",
    ]
    admin = server.service_client(server.mint_service_key()).admin
    assert admin.list_users() == []
