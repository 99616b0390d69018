#!/usr/bin/env python3
"""Counts the suite's tests by kind, from the source: pure (no server), router (the app answering through its router
in process: AccountHarness, RouterServer, withRouterApp) and live (a socket or a process: a server on a port, the
binary, the SMTP sink, the SDK over URLSession). A heuristic over each @Test's text, for the closing notes.

    scripts/test-kinds.py [-v]       # -v: one line per test
"""
import collections
import pathlib
import re
import sys

tests_folder = pathlib.Path(__file__).resolve().parent.parent / "Tests"
roots = [tests_folder / "GatehouseServerTests", tests_folder / "GatehouseClientTests"]
LIVE = re.compile(
    r"live: true|LiveServer\.start|Binary\.start|SMTPSink\.(start|shared)|MailSink\.start|FakeAppleKeys|FakeProviders|Process\(\)"
    r"|Self\.(run|serve)\(\[|gatehouseBinary|runOperator"
)
ROUTER = re.compile(r"AccountHarness\.(with|start)|\.test\(\.router|RouterServer\.start|withRouterApp|withApp")


def tests():
    for path in sorted(path for root in roots for path in root.glob("*.swift")):
        for segment in re.split(r"\n\s*@Test\b", path.read_text())[1:]:
            segment = segment.split("\n}\n")[0]  # not the helpers after the suite's end
            kind = "live" if LIVE.search(segment) else "router" if ROUTER.search(segment) else "pure"
            name = re.search(r'"([^"]*)"', segment)
            yield path.name, kind, name.group(1) if name else "?"


counts = collections.Counter(kind for _, kind, _ in tests())
if "-v" in sys.argv:
    for file, kind, name in tests():
        print(f"{kind:6} {file:28} {name[:90]}")
print(f"{sum(counts.values())} tests: {counts['pure']} pure, {counts['router']} router, {counts['live']} live")
