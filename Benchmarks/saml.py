"""SAML sign-ins for Benchmarks/saml.sh: unsolicited (IdP-initiated) responses from the tests' pysaml2 identity provider
(Tests/saml/idp.py, unchanged), made ahead and posted to Gatehouse's ACS, each once (an assertion id signs in once).

    python3 Benchmarks/saml.py setup --gatehouse URL --key SERVICE_KEY --idp URL --cid CID
        registers Gatehouse's SP metadata at the IdP (POST /sp) and the IdP at Gatehouse for the company CID (which must
        be on the Enterprise tier) with a fresh domain (POST /auth/v1/admin/sso/providers); prints one JSON line
        {"provider", "domain", "entity"}.
    python3 Benchmarks/saml.py run --gatehouse URL (--idp URL --setup FILE)... --label L [--count N]
            [--clients "1 8"] [--modes "signed-response signed-both encrypted-assertion"] [--people 50] [--pid PID]
        signs `people` people per IdP in once each (their accounts made, not timed), then for each mode and client
        count makes N unsolicited responses for those people in turn, the IdPs at once (pysaml2 signs and encrypts
        through an xmlsec1 process per operation, a few to a few tens a second per IdP) (POST /next {mode, name_id}, GET /sso/initiate?sp=…, its
        generation timed apart) and posts them to POST /auth/v1/sso/saml/acs, C at once, without RelayState: each is
        verified (signatures, and for encrypted-assertion the RSA-OAEP key and AES-256-CBC data decrypted), checked
        (audience, recipient, times, the assertion id spent) and signs its person in (the account found, a session
        started, the tokens in the 303's fragment). With --pid, the server's CPU time per sign-in.

Responses expire 5 minutes after the IdP makes them, so each batch is posted right after it is made. Each request
comes from an X-Forwarded-For address of its own, so per-IP limits stay out. Latencies are as the client saw them
(http.client, a keep-alive connection per thread).
"""

import argparse
import itertools
import json
import os
import sys
import threading
import time
import urllib.parse
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from invitations import Client, address, parallel, percentile  # noqa: E402

MODES = "signed-response signed-both encrypted-assertion"


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    if not pid:
        return 0.0
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def setup(options):
    gatehouse, idp = Client(options.gatehouse), Client(options.idp)
    status, sp_metadata, _ = gatehouse.call("GET", "/auth/v1/sso/saml/metadata")
    assert status == 200, f"SP metadata {status}"
    status, answer, _ = idp.call("POST", "/sp", raw=sp_metadata, content_type="application/samlmetadata+xml")
    assert status == 204, f"IdP /sp {status} {answer}"
    status, idp_metadata, _ = idp.call("GET", "/metadata")
    assert status == 200, f"IdP metadata {status}"
    domain = f"sso-{uuid.uuid4().hex[:8]}.example"
    status, answer, _ = gatehouse.call(
        "POST", "/auth/v1/admin/sso/providers",
        {"type": "saml", "company_id": options.cid, "metadata_xml": idp_metadata, "domains": [domain]},
        key=options.key)
    assert status == 201, f"provider {status} {answer}"
    entity = urllib.parse.urlsplit(options.gatehouse)._replace(path="/auth/v1/sso/saml/metadata").geturl()
    print(json.dumps({"provider": answer["id"], "domain": domain, "entity": entity}))


def make_responses(idp, entity, mode, people, count):
    """`count` unsolicited responses in `mode`, for `people` in turn: ([SAMLResponse], seconds taken)."""
    started = time.perf_counter()
    responses = []
    for i in range(count):
        person = people[i % len(people)]
        status, answer, _ = idp.call("POST", "/next", {"mode": mode, "name_id": person,
                                                       "attributes": {"email": [person]}})
        assert status == 204, f"IdP /next {status} {answer}"
        status, answer, _ = idp.call("GET", "/sso/initiate?" + urllib.parse.urlencode({"sp": entity}),
                                        accept="application/json")
        assert status == 200 and isinstance(answer, dict), f"IdP /sso/initiate {status} {str(answer)[:300]}"
        responses.append(answer["SAMLResponse"])
    return responses, time.perf_counter() - started


def post_all(gatehouse, responses, clients, run):
    """Posts each response once to the ACS, `clients` at once: ([seconds], [errors], wall seconds)."""

    def post(client, index, response):
        body = urllib.parse.urlencode({"SAMLResponse": response})
        started = time.perf_counter()
        status, answer, headers = client.call("POST", "/auth/v1/sso/saml/acs", raw=body,
                                              forwarded=address(run, index))
        seconds = time.perf_counter() - started
        location = headers.get("location", "")
        assert status == 303 and "access_token=" in location, f"ACS {status} {location[:300]} {str(answer)[:200]}"
        return seconds

    return parallel(responses, clients, gatehouse, post)


def make_all(idps, mode, count):
    """`count` responses in `mode`, made by every IdP at once (each its share, for its own people), interleaved:
    ([SAMLResponse], seconds taken)."""
    shares = [[] for _ in idps]
    started = time.perf_counter()

    def make(k, idp, entity, people):
        shares[k] = make_responses(idp, entity, mode, people, count // len(idps) + (k < count % len(idps)))[0]

    threads = [threading.Thread(target=make, args=(k, *idp)) for k, idp in enumerate(idps)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    responses = [r for group in itertools.zip_longest(*shares) for r in group if r is not None]
    assert len(responses) == count, f"made {len(responses)} of {count}"
    return responses, seconds


def run(options):
    assert len(options.idp) == len(options.setup), "one --setup per --idp"
    idps = []
    for url, path in zip(options.idp, options.setup):
        record = json.load(open(path))
        people = [f"p{i}-{uuid.uuid4().hex[:4]}@{record['domain']}" for i in range(options.people)]
        idps.append((Client(url), record["entity"], people))
    # The people's first sign-ins (accounts made, the company joined): not timed.
    responses, _ = make_all(idps, "signed-assertion", options.people * len(idps))
    times, errors, _ = post_all(options.gatehouse, responses, 4, 1)
    assert not errors, errors[:3]
    run_number = 2
    for mode in options.modes.split():
        for clients in [int(c) for c in options.clients.replace(",", " ").split()]:
            responses, made = make_all(idps, mode, options.count)
            size = sum(len(r) for r in responses) / len(responses)
            before = cpu_seconds(options.pid)
            times, errors, seconds = post_all(options.gatehouse, responses, clients, run_number)
            cpu = cpu_seconds(options.pid) - before
            run_number += 1
            rate = len(times) / seconds if seconds else 0
            print(f"acs store={options.label} mode={mode} clients={clients} n={len(times)} errors={len(errors)} "
                  f"seconds={seconds:.2f} rps={rate:.1f} p50_ms={percentile(times, 0.5):.2f} "
                  f"p99_ms={percentile(times, 0.99):.2f} max_ms={percentile(times, 1.0):.2f} "
                  f"server_cpu_ms={1000 * cpu / max(1, len(times)):.2f} response_bytes={size:.0f} "
                  f"idp_made_per_s={len(responses) / made:.1f}", flush=True)
            if errors:
                print(f"  first error: {errors[0]}", file=sys.stderr, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    setting = commands.add_parser("setup")
    setting.add_argument("--gatehouse", required=True)
    setting.add_argument("--key", required=True)
    setting.add_argument("--idp", required=True)
    setting.add_argument("--cid", required=True)
    running = commands.add_parser("run")
    running.add_argument("--gatehouse", required=True)
    running.add_argument("--idp", required=True, action="append", help="an IdP (repeat: they make responses at once)")
    running.add_argument("--setup", required=True, action="append", help="the file `setup` wrote for that IdP")
    running.add_argument("--label", required=True)
    running.add_argument("--count", type=int, default=1000)
    running.add_argument("--clients", default="1 8")
    running.add_argument("--modes", default=MODES)
    running.add_argument("--people", type=int, default=50)
    running.add_argument("--pid", type=int, default=0, help="the server's pid, for its CPU time")
    options = parser.parse_args()
    setup(options) if options.command == "setup" else run(options)


if __name__ == "__main__":
    main()
