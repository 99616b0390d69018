#!/usr/bin/env bash
# The SDK's documentation, built so that it cannot rot: GatehouseClient's DocC catalog
# (Sources/GatehouseClient/GatehouseClient.docc: the landing page, its topic groups and the guide's articles) is
# converted with the toolchain's `docc` against the SDK's symbol graphs, and the run fails
#   - on any DocC warning: an article or topic group naming a symbol that is gone or renamed, a broken link;
#   - on any public symbol of GatehouseClient or GatehouseClientTesting without a doc comment (each is listed with its
#     file and line).
# The symbol graphs come from `swift package dump-symbol-graph`, which builds the package as `swift build` does (same
# flags, the shared .build, so after a build it only extracts); no plugin joins the package's dependencies.
#
#   scripts/docs.sh                      check only; the archive is made in a temporary folder and removed
#   scripts/docs.sh --output DIR         keep the archive (DIR/GatehouseClient.doccarchive, for static hosting)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*" >&2; }

output=
while [ $# -gt 0 ]; do
    case $1 in
    --output) output=$2; shift 2 ;;
    --output=*) output=${1#--output=}; shift ;;
    *) echo "usage: scripts/docs.sh [--output DIR]" >&2; exit 2 ;;
    esac
done

started=$(date +%s)
work=$(mktemp -d /tmp/gatehouse-docs.XXXXXX)
trap 'rm -rf "$work"' EXIT
modules=(GatehouseClient GatehouseClientTesting)

# --- the symbol graphs ---------------------------------------------------------------------------------------
log "extracting the SDK's symbol graphs (swift package dump-symbol-graph)"
if ! swift package dump-symbol-graph --skip-synthesized-members >"$work/dump.log" 2>&1; then
    # The build's errors once each (a compiler repeats them per batch), then how the log ends.
    grep -E '^[^ ]+:[0-9]+:[0-9]+: error: ' "$work/dump.log" | sort -u | head -40 >&2 || true
    tail -5 "$work/dump.log" >&2
    echo "docs: FAILED: the package did not build, so there is no symbol graph to check" >&2
    exit 1
fi
log "symbol graphs ready after $(($(date +%s) - started)) s (most of it the build, or waiting for another build's lock)"
graphs=$(sed -n 's/^Files written to //p' "$work/dump.log" | tail -1)
[ -d "$graphs" ] || { cat "$work/dump.log" >&2; echo "docs: no symbol graph folder in the output above" >&2; exit 1; }
for module in "${modules[@]}"; do
    mkdir -p "$work/graphs/$module"
    # A module's own graph, and one per module whose types it extends (Module@Other.symbols.json).
    cp "$graphs/$module.symbols.json" "$work/graphs/$module/"
    cp "$graphs/$module"@*.symbols.json "$work/graphs/$module/" 2>/dev/null || true
done

# --- every public symbol has a doc comment ---------------------------------------------------------------------
log "checking that every public symbol of ${modules[*]} has a doc comment"
status=0
python3 - "$work/graphs" "${modules[@]}" <<'PY' || status=1
import glob, json, os, sys

root, modules = sys.argv[1], sys.argv[2:]
missing, total = [], 0
for module in modules:
    for path in sorted(glob.glob(os.path.join(root, module, "*.symbols.json"))):
        for symbol in json.load(open(path))["symbols"]:
            if symbol["accessLevel"] not in ("public", "open"):
                continue
            total += 1
            # A comment inherited from the protocol a symbol implements (Swift's, Foundation's) counts: DocC shows it.
            lines = symbol.get("docComment", {}).get("lines", [])
            if any(line["text"].strip() for line in lines):
                continue
            location = symbol.get("location", {})
            file = location.get("uri", "").replace("file://" + os.getcwd() + "/", "")
            line = location.get("position", {}).get("line", -1) + 1
            name = ".".join(symbol["pathComponents"])
            kind = symbol["kind"]["displayName"].lower()
            missing.append(f"{file}:{line}: {module}.{name} ({kind}) has no doc comment")
for entry in sorted(missing):
    print(entry)
print(f"docs: {total - len(missing)} of {total} public symbols documented", file=sys.stderr)
sys.exit(1 if missing else 0)
PY

# --- the DocC catalog, warnings as errors ----------------------------------------------------------------------
log "converting Sources/GatehouseClient/GatehouseClient.docc (docc convert --warnings-as-errors)"
archive=${output:+$output/GatehouseClient.doccarchive}
archive=${archive:-$work/GatehouseClient.doccarchive}
[ -z "$output" ] || { mkdir -p "$output"; rm -rf "$archive"; }
if ! docc convert Sources/GatehouseClient/GatehouseClient.docc \
    --additional-symbol-graph-dir "$work/graphs/GatehouseClient" \
    --fallback-display-name GatehouseClient --fallback-bundle-identifier gatehouse.GatehouseClient \
    --fallback-default-module-kind Framework \
    --warnings-as-errors --output-path "$archive" >"$work/docc.log" 2>&1; then
    cat "$work/docc.log" >&2
    status=1
fi

elapsed=$(($(date +%s) - started))
if [ $status = 0 ]; then
    echo "docs: GatehouseClient's catalog built without warnings, every public symbol documented (${elapsed} s)"
else
    echo "docs: FAILED (see above; ${elapsed} s)"
fi
exit $status
