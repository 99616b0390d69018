#!/usr/bin/env bash
# Checks what the SDK's example app links, and fails if anything of the server comes with it: an app that links
# GatehouseClient must get no Hummingbird, no NIO server and no SQL driver of the server. It reads the product's
# link file list (every object file SwiftPM links into it, by module), so it needs no build folder of its own:
# after `swift build --build-tests` the product is already built and this takes a second.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
swift build --product gatehouse-example "$@" >"$log" 2>&1 || { tail -40 "$log"; exit 1; }
list="$(swift build --product gatehouse-example --show-bin-path "$@")/gatehouse-example.product/Objects.LinkFileList"
[ -s "$list" ] || { echo "no link file list at $list"; exit 1; }
modules=$(sed -E 's#.*/([^/]+)\.build/.*#\1#' "$list" | sort -u)
forbidden=$(echo "$modules" | grep -E '^(Hummingbird|NIO|Postgres|SQLiteNIO|SQLiteKit|SQLKit|AsyncHTTPClient|GatehouseServer)' || true)
if [ -n "$forbidden" ]; then
    echo "the SDK pulled in server modules:" $forbidden
    exit 1
fi
echo "the SDK links $(echo "$modules" | wc -l) modules, none of the server's:" $(echo "$modules" | tr '\n' ' ')
