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
# GatehouseAPI too: its build plugin builds the OpenAPI generator, which the SDK's committed client spares an app.
forbidden=$(echo "$modules" | grep -E '^(Hummingbird|NIO|Postgres|SQLiteNIO|SQLiteKit|SQLKit|AsyncHTTPClient|GatehouseServer|GatehouseAPI)' || true)
if [ -n "$forbidden" ]; then
    echo "the SDK pulled in server modules:" $forbidden
    exit 1
fi
echo "the SDK links $(echo "$modules" | wc -l) modules, none of the server's:" $(echo "$modules" | tr '\n' ' ')

# An app that adds this package with the Server trait off, as the SDK's first-hour article says (FirstHour.md in its
# DocC catalog): SwiftPM must resolve none of the server's packages for it (a few seconds, from SwiftPM's cache).
app=$(mktemp -d /tmp/gatehouse-sdk-app.XXXXXX)
trap 'rm -rf "$app" "$log"' EXIT
mkdir -p "$app/Sources/App"
package=$(basename "$PWD")
cat >"$app/Package.swift" <<EOF
// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "App",
    platforms: [.macOS(.v14), .iOS(.v17)],
    dependencies: [.package(path: "$PWD", traits: [])],
    targets: [.executableTarget(name: "App", dependencies: [.product(name: "GatehouseClient", package: "$package")])]
)
EOF
echo 'import GatehouseClient' >"$app/Sources/App/main.swift"
(cd "$app" && swift package resolve) >"$log" 2>&1 || { tail -40 "$log"; exit 1; }
packages=$(cd "$app" && swift package show-dependencies --format flatlist | sort -u |
    grep -vix "$package" || true)
server=$(echo "$packages" | grep -E '^(hummingbird|swift-nio|postgres|sqlite-|sql-kit|async-http-client|jwt-kit|swift-prometheus|swift-service-lifecycle|swift-mustache)' || true)
if [ -n "$server" ]; then
    echo "an app with the Server trait off resolved the server's packages:" $server
    exit 1
fi
# Nor the OpenAPI generator's: the SDK's client is committed (Sources/GatehouseClientAPI), and GatehouseAPI's plugin
# takes the generator only with the Server trait, so such an app builds no generator.
generator=$(echo "$packages" | grep -E '^(swift-openapi-generator|openapikit|yams)$' || true)
if [ -n "$generator" ]; then
    echo "an app with the Server trait off resolved the OpenAPI generator's packages:" $generator
    exit 1
fi
echo "an app with the Server trait off resolves $(echo "$packages" | wc -l) packages, none of the server's:" \
    $(echo "$packages" | tr '\n' ' ')

# The SDK's own tests (Tests/GatehouseClientTests) in Tests/sdk-alone, a package that adds this one with the Server
# trait off: they must build and pass there, and nothing of the server may have been compiled for them. Its build
# folder is its own and kept, so after the first build (minutes: swift-crypto's BoringSSL, GRDB, the runtime and the
# committed client; no generator) a run compiles only what changed.
alone=Tests/sdk-alone
[ ! -f Package.resolved ] || cp Package.resolved "$alone/Package.resolved"  # the same versions as the server's build
(cd "$alone" && swift build --build-tests) >"$log" 2>&1 || { tail -40 "$log"; exit 1; }
bin=$(cd "$alone" && swift build --show-bin-path)
# Every module with an object file, but the host tools of build plugins (named `…-tool`).
compiled=$(find "$bin" -name '*.o' | sed -nE "s#^$bin/([^/]+)\.build/.*#\1#p" | grep -v -- '-tool$' | sort -u)
server=$(echo "$compiled" | grep -E '^(Hummingbird|NIO|Postgres|SQLiteNIO|SQLiteKit|SQLKit|AsyncHTTPClient|JWTKit|GatehouseServer|GatehouseAPI|gatehouse$)' || true)
if [ -n "$server" ]; then
    echo "the SDK's tests compiled server modules:" $server
    exit 1
fi
(cd "$alone" && swift test --skip-build) >"$log" 2>&1 || { grep -E 'recorded an issue|error:' "$log" | head -40; exit 1; }
echo "the SDK's tests, built with the Server trait off ($(echo "$compiled" | wc -l) modules compiled, none of the" \
    "server's): $(grep -oE 'Test run with [0-9]+ tests[^.]*passed' "$log" | tail -1)"
