#!/usr/bin/env bash
# The README's first command, as a newcomer types it on a new machine of this kind: `swift run gatehouse serve` must
# build and start with nothing installed by hand. scripts/test runs this first, before it installs anything.
#
# A machine that ran the suite before may hold Debian development files the image lacks (libargon2-dev was one:
# the server linked it until it loaded libargon2 at run time). So the build runs in a private mount namespace where
# those files are hidden, as on a new machine: a change that starts to need one fails here, not on a newcomer's.
# Then the server starts (port 0, a throwaway data folder), answers /health/ready, and is stopped.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*" >&2; }

# Development files of packages the image does not ship (see the env notes on the machine kind): headers and the
# unversioned link names. The runtime libraries (libargon2.so.1) stay: the image has them.
hidden=(/usr/include/argon2.h /usr/lib/x86_64-linux-gnu/libargon2.so /usr/lib/x86_64-linux-gnu/libargon2.a
    /usr/lib/x86_64-linux-gnu/pkgconfig/libargon2.pc)

if [ "${1:-}" != "--inside" ]; then
    present=()
    for file in "${hidden[@]}"; do [ -e "$file" ] && present+=("$file"); done
    if [ ${#present[@]} -gt 0 ]; then
        if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1; then
            log "hiding ${present[*]} from the build (a new machine has none of them)"
            exec unshare --mount --propagation private bash "$0" --inside "${present[@]}"
        fi
        log "cannot hide ${present[*]} (needs root and unshare): the build below may see them"
    fi
    exec bash "$0" --inside
fi
shift
for file in "$@"; do mount --bind /dev/null "$file"; done

work=$(mktemp -d /tmp/gatehouse-fresh.XXXXXX)
server=
cleanup() {
    if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

log "building and starting the server exactly as the README says: swift run gatehouse serve"
# Port 0 and a throwaway data folder through the environment, so the command itself is the README's.
GATEHOUSE_PORT=0 GATEHOUSE_DATA_DIR="$work/data" swift run gatehouse serve >"$work/serve.log" 2>&1 &
server=$!

# The build comes first (minutes on a new clone); then the start line names the port.
deadline=$((SECONDS + 1800))
url=
while [ $SECONDS -lt $deadline ]; do
    if ! kill -0 "$server" 2>/dev/null; then
        cat "$work/serve.log" >&2
        log "swift run gatehouse serve ended before it listened"
        exit 1
    fi
    url=$(grep -oE 'gatehouse listening on http://[0-9.]+:[0-9]+' "$work/serve.log" | head -1 | sed 's/^gatehouse listening on //' || true)
    [ -n "$url" ] && break
    sleep 1
done
if [ -z "$url" ]; then
    tail -40 "$work/serve.log" >&2
    log "swift run gatehouse serve did not listen within 30 minutes"
    exit 1
fi

ready=
for _ in $(seq 1 100); do
    if curl -fsS "$url/health/ready" >"$work/ready.json" 2>/dev/null; then ready=yes; break; fi
    sleep 0.1
done
if [ -z "$ready" ]; then
    tail -40 "$work/serve.log" >&2
    log "the server listened at $url but /health/ready never answered 200"
    exit 1
fi
grep -E 'gatehouse listening on' "$work/serve.log" | head -1
echo "fresh-serve: swift run gatehouse serve built and answered $(cat "$work/ready.json") at $url"
