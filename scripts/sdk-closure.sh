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

# An app that adds this package with the Server trait off, as the README's first-hour section says: SwiftPM must
# resolve none of the server's packages for it (a few seconds, from SwiftPM's cache).
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
echo "an app with the Server trait off resolves $(echo "$packages" | wc -l) packages, none of the server's:" \
    $(echo "$packages" | tr '\n' ' ')
