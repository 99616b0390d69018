#!/usr/bin/env python3
"""A throwaway SMTP server for Gatehouse's mail tests.

Listens on 127.0.0.1 (on a free port unless --port names one), prints "READY <port>" once it accepts connections,
and writes every message it accepts to OUTDIR as message-NNNN.eml (the raw bytes after dot-unstuffing) and
message-NNNN.json (the envelope and the message as Python's email package reads it). Each file appears whole, by
rename.

RCPT to an address starting with "reject" is answered "550 5.1.1 no such user"; one starting with "defer" gets
"451 4.3.0 try again later".

With --closed it holds its port without listening (connections are refused, as by a mail server that is down)
until the line "OPEN" arrives on its standard input; the port is its own all along, so nothing else can take it.

It exits when its standard input closes (so it dies with the test process), on SIGTERM or SIGINT, or after
--max-lifetime seconds, whichever comes first.
"""

import argparse
import asyncio
import email
import email.policy
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
from datetime import datetime, timedelta, timezone

try:
    from aiosmtpd.smtp import SMTP, AuthResult
except ImportError:
    sys.stderr.write(
        "smtp_sink: the Python package aiosmtpd is not importable by this python3 (%s); install the test "
        "requirements with: python3 -m pip install -r scripts/requirements-test.txt\n" % sys.executable
    )
    sys.exit(3)


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outdir", help="folder that receives the accepted messages")
    parser.add_argument("--port", type=int, default=0, help="port to listen on; 0 (the default) picks a free one")
    parser.add_argument("--tls", choices=["none", "starttls", "implicit"], default="none",
                        help="offer STARTTLS, or speak TLS from the start, with a fresh self-signed certificate")
    parser.add_argument("--require-starttls", action="store_true", help="refuse commands before STARTTLS")
    parser.add_argument("--auth", metavar="USER:PASSWORD", help="offer AUTH and accept only these credentials")
    parser.add_argument("--auth-mechanisms", default="PLAIN,LOGIN", help="comma-separated AUTH mechanisms to offer")
    parser.add_argument("--auth-require-tls", action="store_true",
                        help="offer AUTH only after STARTTLS (aiosmtpd's default; off here unless given)")
    parser.add_argument("--silent", action="store_true", help="accept connections but never say anything")
    parser.add_argument("--smtputf8", action="store_true", help="offer SMTPUTF8 (RFC 6531) for non-ASCII addresses")
    parser.add_argument("--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--inject-after-starttls", action="store_true",
                        help="a scripted server that sends a plain-text reply right behind its STARTTLS go-ahead, "
                             "as in the STARTTLS command-injection attacks")
    parser.add_argument("--closed", action="store_true",
                        help="hold the port without listening until the line OPEN arrives on standard input")
    parser.add_argument("--max-lifetime", type=float, default=300, help="seconds after which the sink exits anyway")
    return parser.parse_args()


def make_certificate(folder):
    """Writes a self-signed certificate for localhost and 127.0.0.1; returns (certificate path, key path)."""
    cert_path = os.path.join(folder, "cert.pem")
    key_path = os.path.join(folder, "key.pem")
    try:
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        # The openssl command line tool does the same when the cryptography package is missing.
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", key_path, "-out", cert_path, "-days", "1", "-subj", "/CN=localhost",
             "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return cert_path, key_path
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.now(timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
        .sign(key, hashes.SHA256())
    )
    with open(key_path, "wb") as handle:
        handle.write(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    with open(cert_path, "wb") as handle:
        handle.write(certificate.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def write_atomically(path, data):
    temporary = path + ".tmp"
    with open(temporary, "wb") as handle:
        handle.write(data)
    os.replace(temporary, path)


def body_text(message, subtype):
    part = message.get_body(preferencelist=(subtype,))
    return None if part is None else part.get_content()


class Sink:
    def __init__(self, outdir):
        self.outdir = outdir
        self.count = 0

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.lower().startswith("reject"):
            return "550 5.1.1 no such user"
        if address.lower().startswith("defer"):
            return "451 4.3.0 try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.count += 1
        stem = os.path.join(self.outdir, "message-%04d" % self.count)
        content = envelope.content if isinstance(envelope.content, bytes) else envelope.content.encode()
        message = email.message_from_bytes(content, policy=email.policy.default)
        defects = [repr(defect) for part in message.walk() for defect in part.defects]
        for header in ("subject", "from", "to", "date", "message-id"):
            value = message[header]
            defects += [repr(defect) for defect in getattr(value, "defects", ())]
        auth = session.auth_data if session.authenticated else None
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "from": str(message["from"]),
            "to": str(message["to"]),
            "subject": str(message["subject"]),
            "date": str(message["date"]),
            "message_id": str(message["message-id"]),
            "mime_version": str(message["mime-version"]),
            "content_type": message.get_content_type(),
            "text": body_text(message, "plain"),
            "html": body_text(message, "html"),
            "defects": defects,
            "tls": server.transport.get_extra_info("ssl_object") is not None,
            "auth_mechanism": auth[0] if auth else None,
            "auth_login": auth[1] if auth else None,
            "longest_line": max(len(line) for line in content.split(b"\r\n")),
        }
        write_atomically(stem + ".eml", content)
        write_atomically(stem + ".json", json.dumps(record, indent=2).encode())
        return "250 2.0.0 Message accepted for delivery"


def make_authenticator(credentials):
    user, _, password = credentials.partition(":")

    def authenticate(server, session, envelope, mechanism, auth_data):
        login = auth_data.login.decode("utf-8", "replace")
        if login == user and auth_data.password.decode("utf-8", "replace") == password:
            return AuthResult(success=True, auth_data=(mechanism, login))
        return AuthResult(success=False, handled=False)

    return authenticate


async def injecting(reader, writer):
    writer.write(b"220 sink.test ESMTP\r\n")
    while True:
        line = await reader.readline()
        if not line:
            break
        command = line.strip().upper()
        if command.startswith(b"EHLO"):
            writer.write(b"250-sink.test\r\n250-STARTTLS\r\n250 8BITMIME\r\n")
        elif command == b"STARTTLS":
            # One write, so the injected reply reaches the client in the same read as the go-ahead.
            writer.write(b"220 2.0.0 Ready to start TLS\r\n250-sink.test\r\n250 AUTH PLAIN\r\n")
        elif command == b"QUIT":
            writer.write(b"221 2.0.0 Bye\r\n")
            await writer.drain()
            break
        else:
            writer.write(b"503 5.5.1 Unexpected command\r\n")
        await writer.drain()
    writer.close()


async def serve(arguments, stop, opened):
    loop = asyncio.get_running_loop()
    where = {"host": arguments.bind, "port": arguments.port}
    if arguments.closed:
        # Bound, not listening: the kernel refuses connections, and no other socket can take the port meanwhile.
        held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind((arguments.bind, arguments.port))
        print("READY %d" % held.getsockname()[1], flush=True)
        await opened.wait()
        where = {"sock": held}
    tls_folder = None
    try:
        context = None
        if arguments.tls != "none":
            tls_folder = tempfile.mkdtemp(prefix="smtp-sink-tls-")
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(*make_certificate(tls_folder))
        if arguments.silent:
            async def silent(reader, writer):
                await reader.read()
                writer.close()

            server = await asyncio.start_server(silent, **where)
        elif arguments.inject_after_starttls:
            server = await asyncio.start_server(injecting, **where)
        else:
            sink = Sink(arguments.outdir)
            options = {"hostname": "sink.test", "loop": loop, "enable_SMTPUTF8": arguments.smtputf8}
            if arguments.tls == "starttls":
                options.update(tls_context=context, require_starttls=arguments.require_starttls)
            if arguments.auth:
                offered = {name.strip().upper() for name in arguments.auth_mechanisms.split(",")}
                options.update(
                    authenticator=make_authenticator(arguments.auth),
                    auth_require_tls=arguments.auth_require_tls,
                    auth_exclude_mechanism=[name for name in ("PLAIN", "LOGIN") if name not in offered])
            server = await loop.create_server(
                lambda: SMTP(sink, **options), **where, ssl=context if arguments.tls == "implicit" else None)
        port = server.sockets[0].getsockname()[1]
        print(("OPEN %d" if arguments.closed else "READY %d") % port, flush=True)
        try:
            await asyncio.wait_for(stop.wait(), timeout=arguments.max_lifetime)
        except asyncio.TimeoutError:
            sys.stderr.write("smtp_sink: --max-lifetime reached, exiting\n")
        server.close()
    finally:
        if tls_folder:
            shutil.rmtree(tls_folder, ignore_errors=True)


def main():
    arguments = parse_arguments()
    os.makedirs(arguments.outdir, exist_ok=True)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    stop = asyncio.Event()
    opened = asyncio.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)

    def watch_stdin():
        # Reading until EOF ties the sink's life to the test process that holds the other end of the pipe.
        # The line OPEN opens a --closed sink.
        try:
            for line in sys.stdin.buffer:
                if line.strip() == b"OPEN":
                    loop.call_soon_threadsafe(opened.set)
        except (OSError, ValueError):
            pass
        try:
            loop.call_soon_threadsafe(stop.set)
        except RuntimeError:
            pass  # the loop has already finished

    threading.Thread(target=watch_stdin, daemon=True).start()
    loop.run_until_complete(serve(arguments, stop, opened))


if __name__ == "__main__":
    main()
