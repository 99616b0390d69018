"""A DNS server for the domain verification tests, built on dnslib.

Usage: server.py RECORDS.json

Binds a UDP port on 127.0.0.1 (one the system picks), prints "READY <port>", and answers each query from
RECORDS.json, read again for every query so a test changes the zone by rewriting the file:

    {"records": {"_gatehouse-challenge.acme.example": ["gatehouse-verification=..."]},
     "silent": ["_gatehouse-challenge.slow.example"]}

A name in "records" answers its TXT values (none for another type); a name in "silent" gets no answer at all (the
client's lookup times out); any other name is NXDOMAIN. Exits when its standard input closes, so a test runner that
dies takes it along.
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


def main():
    path = sys.argv[1]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
    print(f"READY {sock.getsockname()[1]}", flush=True)
    while True:
        data, peer = sock.recvfrom(4096)
        try:
            request = DNSRecord.parse(data)
        except Exception:
            continue
        with open(path, encoding="utf-8") as f:
            zone = json.load(f)
        name = str(request.q.qname).rstrip(".").lower()
        if name in zone.get("silent", []):
            continue
        reply = request.reply()
        values = zone.get("records", {}).get(name)
        if values is None:
            reply.header.rcode = RCODE.NXDOMAIN
        elif request.q.qtype == QTYPE.TXT:
            for value in values:
                reply.add_answer(RR(request.q.qname, QTYPE.TXT, rdata=TXT(value), ttl=60))
        sock.sendto(reply.pack(), peer)


if __name__ == "__main__":
    main()
