"""A DNS server for the domain verification tests, built on dnslib.

Usage: server.py RECORDS.json

Listens on 127.0.0.1 over TCP and UDP on the same port (one the system picks), prints "READY <port>", and answers
each query from RECORDS.json, read again for every query so a test changes the zone by rewriting the file:

    {"records": {"_gatehouse-challenge.acme.example": ["gatehouse-verification=..."]},
     "silent": ["_gatehouse-challenge.slow.example"],
     "truncate": ["_gatehouse-challenge.big.example"],
     "silent_tcp": ["_gatehouse-challenge.big.example"]}

A name in "records" answers its TXT values (none for another type); a name in "silent" gets no answer at all (the
client's lookup times out); any other name is NXDOMAIN. A name in "truncate" is answered over UDP with TC set and no
records, as a resolver does when the answer does not fit, and in full over TCP (RFC 1035 4.2.2 framing: a 2-byte
length before each message); a name in "silent_tcp" gets no answer over TCP (the connection stays open). Exits when
its standard input closes, so a test runner that dies takes it along.
"""

import json
import os
import socket
import sys
import threading

from dnslib import QTYPE, RCODE, RR, TXT, DNSRecord


def exit_when_stdin_closes():
    sys.stdin.read()
    os._exit(0)


def bind_same_port():
    """A TCP listener on a port the system picks, and a UDP socket on the same port number (tried again if that
    UDP port happens to be taken)."""
    for _ in range(20):
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.bind(("127.0.0.1", 0))
        port = tcp.getsockname()[1]
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            udp.bind(("127.0.0.1", port))
        except OSError:
            tcp.close()
            udp.close()
            continue
        tcp.listen(16)
        return tcp, udp, port
    raise SystemExit("no port free for both TCP and UDP")


def reply_to(data, path, over_tcp):
    """The packed reply to the query `data`, or None for no reply."""
    try:
        request = DNSRecord.parse(data)
    except Exception:
        return None
    with open(path, encoding="utf-8") as f:
        zone = json.load(f)
    name = str(request.q.qname).rstrip(".").lower()
    if name in zone.get("silent", []):
        return None
    if over_tcp and name in zone.get("silent_tcp", []):
        return None
    reply = request.reply()
    if not over_tcp and name in zone.get("truncate", []):
        reply.header.tc = 1
        return reply.pack()
    values = zone.get("records", {}).get(name)
    if values is None:
        reply.header.rcode = RCODE.NXDOMAIN
    elif request.q.qtype == QTYPE.TXT:
        for value in values:
            reply.add_answer(RR(request.q.qname, QTYPE.TXT, rdata=TXT(value), ttl=60))
    return reply.pack()


def read_exactly(conn, count):
    data = b""
    while len(data) < count:
        chunk = conn.recv(count - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def serve_tcp_connection(conn, path):
    """Framed queries until the client closes; a silent name's connection just waits for the client."""
    with conn:
        try:
            while True:
                prefix = read_exactly(conn, 2)
                if prefix is None:
                    return
                data = read_exactly(conn, int.from_bytes(prefix, "big"))
                if data is None:
                    return
                packed = reply_to(data, path, over_tcp=True)
                if packed is not None:
                    conn.sendall(len(packed).to_bytes(2, "big") + packed)
        except OSError:
            return


def serve_tcp(listener, path):
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve_tcp_connection, args=(conn, path), daemon=True).start()


def main():
    path = sys.argv[1]
    tcp, udp, port = bind_same_port()
    threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
    threading.Thread(target=serve_tcp, args=(tcp, path), daemon=True).start()
    print(f"READY {port}", flush=True)
    while True:
        data, peer = udp.recvfrom(4096)
        packed = reply_to(data, path, over_tcp=False)
        if packed is not None:
            udp.sendto(packed, peer)


if __name__ == "__main__":
    main()
