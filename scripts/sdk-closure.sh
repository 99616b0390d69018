#!/usr/bin/env bash
# Builds the SDK's example app alone, in its own build folder, and fails if anything of the server came with it:
# an app that links GatehouseClient must build no Hummingbird, no NIO server and no SQL driver of the server.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=.build-sdk
log=$(mktemp)
swift build --product gatehouse-example --scratch-path "$scratch" >"$log" 2>&1 || { tail -40 "$log"; exit 1; }
modules=$(ls "$(swift build --product gatehouse-example --scratch-path "$scratch" --show-bin-path)/Modules")
forbidden=$(echo "$modules" | grep -E '^(Hummingbird|NIO|Postgres|SQLiteNIO|SQLiteKit|SQLKit|AsyncHTTPClient|GatehouseServer)' || true)
if [ -n "$forbidden" ]; then
    echo "the SDK pulled in server modules:" $forbidden
    exit 1
fi
echo "the SDK builds $(echo "$modules" | grep -c '\.swiftmodule$') modules, none of the server's:" \
    $(echo "$modules" | grep '\.swiftmodule$' | sed 's/\.swiftmodule$//' | tr '\n' ' ')
