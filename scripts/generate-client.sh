#!/usr/bin/env bash
# Regenerates the SDK's committed client, Sources/GatehouseClientAPI/Generated/, from the contract
# (Sources/GatehouseAPI/openapi.yaml) and Sources/GatehouseClientAPI/openapi-generator-config.yaml, with the
# swift-openapi-generator this package resolves (its `swift-openapi-generator` executable, built like any product:
# nothing is fetched that SwiftPM does not already have). The SDK's code is committed so that an app building
# GatehouseClient builds no generator (OpenAPIKit, Yams and the rest); the server keeps the build plugin.
#
# Usage: scripts/generate-client.sh [--check] [swift build options, e.g. -c release]
# With --check it generates into a temporary folder instead and fails, naming the files, when the committed ones
# differ: the contract or the configuration changed and the script was not run (scripts/test runs this).
set -euo pipefail
cd "$(dirname "$0")/.."

check=
if [ "${1:-}" = --check ]; then
    check=1
    shift
fi
document=Sources/GatehouseAPI/openapi.yaml
config=Sources/GatehouseClientAPI/openapi-generator-config.yaml
committed=Sources/GatehouseClientAPI/Generated

work=$(mktemp -d /tmp/gatehouse-generate-client.XXXXXX)
trap 'rm -rf "$work"' EXIT
swift build --product swift-openapi-generator "$@" >"$work/build.log" 2>&1 || {
    tail -40 "$work/build.log" >&2
    echo "generate-client: building swift-openapi-generator failed" >&2
    exit 1
}
generator="$(swift build --show-bin-path "$@")/swift-openapi-generator"
mkdir "$work/out"
"$generator" generate --config "$config" --output-directory "$work/out" "$document" >"$work/generate.log" 2>&1 || {
    cat "$work/generate.log" >&2
    echo "generate-client: swift-openapi-generator failed on $document with $config" >&2
    exit 1
}

if [ -n "$check" ]; then
    if ! diff -r "$committed" "$work/out" >"$work/diff" 2>&1; then
        echo "generate-client: $committed is stale: it is not what $config makes of $document." >&2
        echo "Run scripts/generate-client.sh and commit what it writes. The difference:" >&2
        sed "s#$work/out#(generated)#g" "$work/diff" | head -60 >&2
        exit 1
    fi
    echo "generate-client: $committed is up to date ($(ls "$committed" | wc -l) files)"
else
    mkdir -p "$committed"
    rm -f "$committed"/*.swift
    cp "$work/out"/*.swift "$committed/"
    echo "generate-client: wrote $(ls "$committed" | wc -l) files to $committed"
fi
